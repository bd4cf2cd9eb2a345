"""Evaluate a checkpoint on a config's test set with mmengine's Runner.

Example:
    python tools/test.py configs/seg/goliath/sapiens_0.3b-200e_goliath-1024x768.py \\
        sapiens_0.3b_goliath_best_goliath_mIoU_7673_epoch_194.pth \\
        --out work_dirs/seg_0.3b/metrics.json --dump work_dirs/seg_0.3b/preds.pkl

The metrics are written as JSON to ``--out`` (default:
``<work_dir>/<timestamp>/metrics.json``); ``--dump`` also writes every
prediction to a pickle file (mmengine's ``DumpResults``). Multi-GPU:
tools/dist_test.sh, tools/slurm_test.sh.
"""
import argparse
import os
import os.path as osp

from mmengine.config import DictAction
from mmengine.dist import is_main_process

import sapiens_mm  # noqa: F401  (registers modules, safe checkpoint loading)
from sapiens_mm.apis.runner_cfg import (build_runner, build_test_cfg,
                                        write_metrics_json)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Evaluate a Sapiens checkpoint (mmengine Runner).')
    parser.add_argument('config', help='config file path')
    parser.add_argument('checkpoint', help='checkpoint file (Runner, '
                        'official Sapiens or plain state dict)')
    parser.add_argument('--work-dir', help='folder for logs and metrics')
    parser.add_argument('--out', help='metrics JSON file (default: '
                        '<work_dir>/<timestamp>/metrics.json)')
    parser.add_argument('--dump', help='also write all predictions to this '
                        '.pkl file')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config entries')
    parser.add_argument('--launcher', default='none',
                        choices=['none', 'pytorch', 'slurm', 'mpi'],
                        help='job launcher for distributed testing')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args(argv)
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)
    return args


def main(argv=None):
    args = parse_args(argv)
    cfg = build_test_cfg(args.config, args.checkpoint, work_dir=args.work_dir,
                         cfg_options=args.cfg_options, launcher=args.launcher,
                         dump=args.dump)
    runner = build_runner(cfg)
    metrics = runner.test()
    if is_main_process():
        out = args.out or osp.join(runner.log_dir, 'metrics.json')
        write_metrics_json(metrics, out, args.config, args.checkpoint)
        runner.logger.info(f'Metrics written to {out}')
    return metrics


if __name__ == '__main__':
    main()
