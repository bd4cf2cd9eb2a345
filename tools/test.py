"""Evaluate a checkpoint on a config's test set with mmengine's Runner."""
import argparse
import os

from mmengine.config import DictAction
from mmengine.runner import Runner

import sapiens_mm  # noqa: F401  (registers modules, safe checkpoint loading)
from sapiens_mm.apis import build_test_cfg


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Evaluate a Sapiens checkpoint (mmengine Runner).')
    parser.add_argument('config', help='config file path')
    parser.add_argument('checkpoint', help='checkpoint file (Runner, '
                        'official Sapiens or plain state dict)')
    parser.add_argument('--work-dir', help='folder for logs and metrics')
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
                         cfg_options=args.cfg_options, launcher=args.launcher)
    runner = Runner.from_cfg(cfg)
    return runner.test()


if __name__ == '__main__':
    main()
