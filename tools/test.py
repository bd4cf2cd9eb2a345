"""Evaluate a checkpoint on a config's test set with mmengine's Runner.

Example:
    python tools/test.py configs/seg/goliath/sapiens_0.3b-200e_goliath-1024x768.py \\
        sapiens_0.3b_goliath_best_goliath_mIoU_7673_epoch_194.pth \\
        --out work_dirs/seg_0.3b/metrics.json --dump work_dirs/seg_0.3b/preds.pkl
    # a released model by name, downloaded once (rank 0 of a distributed run)
    python tools/test.py configs/seg/goliath/sapiens_0.3b-200e_goliath-1024x768.py \
        sapiens-seg-0.3b

The metrics are written as JSON to ``--out`` (default:
``<work_dir>/<timestamp>/metrics.json``); ``--dump`` also writes every
prediction to a pickle file (mmengine's ``DumpResults``). Multi-GPU:
tools/dist_test.sh, tools/slurm_test.sh.

The checkpoint must fit the model: missing, unexpected or wrong-shape keys
are an error (``--non-strict`` evaluates anyway, with a warning), and NaN /
inf weights are always refused.

The test loop runs the model's CPU linear layers in their inference form
(:class:`~sapiens_mm.engine.InferenceFormHook`, the speed of the
inferencers; ``--no-inference-form`` runs the plain model). As a whole
program it reads local checkpoints through sapiens_mm's safe reader
(:func:`sapiens_mm.zoo.safe_checkpoint_loading`) for its run.
"""
import argparse
import json
import os
import os.path as osp

from mmengine.config import DictAction
from mmengine.dist import is_main_process

import sapiens_mm  # noqa: F401  (registers the modules)
from sapiens_mm.engine.runner_cfg import (build_runner, build_test_cfg,
                                        explain_json_error, prepare_work_dir,
                                        write_metrics_json)
from sapiens_mm.engine.fileio import ensure_writable_dir
from sapiens_mm.cli import add_debug_argument, run_cli
from sapiens_mm.zoo import (lookup_card, resolve_checkpoint,
                            safe_checkpoint_loading)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Evaluate a Sapiens checkpoint (mmengine Runner).')
    parser.add_argument('config', help='config file path')
    parser.add_argument('checkpoint', help='checkpoint file (Runner, '
                        'official Sapiens or plain state dict, Transformers '
                        'Sapiens2 folder), a released model name '
                        '(sapiens-seg-0.3b; downloaded once) or an '
                        'hf://<org>/<repo>/<file> URL')
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
    parser.add_argument('--non-strict', action='store_true',
                        help='evaluate a checkpoint that does not fit the '
                        'model (missing / unexpected / wrong-shape keys) '
                        'with a warning; the unfitting weights stay random')
    parser.add_argument('--no-inference-form', action='store_true',
                        help='run the plain model (by default the CPU '
                        'linear layers run packed, as the inferencers run '
                        'them)')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    add_debug_argument(parser)
    args = parser.parse_args(argv)
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)
    return args


def main(argv=None):
    args = parse_args(argv)
    checkpoint = args.checkpoint
    if checkpoint.startswith('hf://') or (not osp.exists(checkpoint)
                                          and lookup_card(checkpoint)):
        # a Hub file or registry model: the Runner's load_from downloads it
        # (each node's local rank 0; the node's other ranks wait for it)
        checkpoint = checkpoint if checkpoint.startswith('hf://') else \
            f'hf://{checkpoint}'
    else:  # a local file or Transformers folder; else a one-line error
        checkpoint, _ = resolve_checkpoint(checkpoint)
    cfg = build_test_cfg(args.config, checkpoint, work_dir=args.work_dir,
                         cfg_options=args.cfg_options, launcher=args.launcher,
                         dump=args.dump, strict=not args.non_strict,
                         inference_form=not args.no_inference_form)
    prepare_work_dir(cfg)
    for path in (args.out, args.dump):
        if path:
            ensure_writable_dir(osp.dirname(osp.abspath(path)),
                                f'folder of {path}')
    try:
        with safe_checkpoint_loading():
            runner = build_runner(cfg)
            metrics = runner.test()
    except json.JSONDecodeError as e:
        raise ValueError(explain_json_error(cfg, e)) from e
    if is_main_process():
        out = args.out or osp.join(runner.log_dir, 'metrics.json')
        write_metrics_json(metrics, out, args.config, checkpoint)
        runner.logger.info(f'Metrics written to {out}')
    return metrics


if __name__ == '__main__':
    run_cli(main, prog='tools/test.py')
