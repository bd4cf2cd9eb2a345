"""Train a model from a config file with mmengine's Runner.

As a whole program it sets, for its own run: mmengine's loader of local
checkpoints to sapiens_mm's safe reader (``load_from``, ``--resume``,
``Pretrained`` init; :func:`sapiens_mm.zoo.safe_checkpoint_loading`), and
crash-safe checkpoint writes for a config whose ``CheckpointHook`` names no
file backend (:func:`sapiens_mm.engine.fileio.use_atomic_checkpoints`).

Example:
    python tools/train.py configs/seg/goliath/sapiens_0.3b-200e_goliath-1024x768.py \\
        --work-dir work_dirs/seg_0.3b --amp

Multi-GPU / multi-node: tools/dist_train.sh (torchrun) and
tools/slurm_train.sh (srun). A config that sets ``runner_type`` (e.g. the
FSDP configs in configs/fsdp/) is built with ``RUNNERS.build`` (mmengine's
FlexibleRunner), any other with ``Runner.from_cfg``.
"""
import argparse
import json
import os

from mmengine.config import DictAction

import sapiens_mm  # noqa: F401  (registers the modules)
from sapiens_mm.engine.fileio import use_atomic_checkpoints
from sapiens_mm.engine.runner_cfg import (build_runner, build_train_cfg,
                                        explain_json_error, prepare_work_dir)
from sapiens_mm.cli import add_debug_argument, run_cli
from sapiens_mm.zoo import safe_checkpoint_loading


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Train a Sapiens model (mmengine Runner).')
    parser.add_argument('config', help='config file path')
    parser.add_argument('--work-dir', help='folder for logs and checkpoints '
                        '(default: ./work_dirs/<config name>)')
    parser.add_argument(
        '--resume', nargs='?', const='auto', default=None,
        metavar='auto|PATH',
        help='resume training: with no value or "auto", from the latest '
        'complete checkpoint in the work dir (starts fresh if there is '
        'none); with a path, from that checkpoint')
    parser.add_argument('--amp', action='store_true',
                        help='mixed precision: fp16 with dynamic loss scaling '
                        'on CUDA, bf16 where fp16 is not supported (CPU)')
    parser.add_argument('--auto-scale-lr', action='store_true',
                        help='scale the lr by total batch size / '
                        'auto_scale_lr.base_batch_size of the config')
    parser.add_argument('--seed', type=int, help='random seed')
    parser.add_argument('--deterministic', action='store_true',
                        help='use deterministic algorithms (with --seed, '
                        'a resumed run repeats the losses of an '
                        'uninterrupted one)')
    parser.add_argument('--nonfinite-loss', choices=['stop', 'skip'],
                        default=None,
                        help='on a NaN/inf loss: stop with an error '
                        '(default) or skip the step without updating '
                        'the weights')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction,
                        help='override config entries, e.g. '
                        'train_dataloader.batch_size=4')
    parser.add_argument('--launcher', default='none',
                        choices=['none', 'pytorch', 'slurm', 'mpi'],
                        help='job launcher for distributed training')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    add_debug_argument(parser)
    args = parser.parse_args(argv)
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)
    return args


def main(argv=None):
    args = parse_args(argv)
    cfg = build_train_cfg(
        args.config, work_dir=args.work_dir, resume=args.resume,
        amp=args.amp, auto_scale_lr=args.auto_scale_lr,
        cfg_options=args.cfg_options, launcher=args.launcher, seed=args.seed,
        deterministic=args.deterministic,
        nonfinite_loss=args.nonfinite_loss)
    use_atomic_checkpoints(cfg)
    prepare_work_dir(cfg)
    try:
        with safe_checkpoint_loading():
            runner = build_runner(cfg)
            runner.train()
    except json.JSONDecodeError as e:
        raise ValueError(explain_json_error(cfg, e)) from e


if __name__ == '__main__':
    run_cli(main, prog='tools/train.py')
