"""Make the backbone-only "clean" file of an MAE pretraining checkpoint.

The output is a flat encoder state dict like the official *_clean.pth files,
which the fine-tuning configs load with
init_cfg=dict(type='Pretrained', checkpoint=...).

Example:
    python tools/convert_pretrain_to_clean.py \\
        work_dirs/sapiens_0.3b-mae-1600e_humans-1024x1024/epoch_1600.pth \\
        checkpoints/sapiens_0.3b/my_sapiens_0.3b_clean.pth
"""
import argparse

import torch

import sapiens_mm  # noqa: F401
from sapiens_mm.checkpoint import convert_pretrain_to_clean
from sapiens_mm.cli import add_debug_argument, run_cli


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='MAE pretraining checkpoint -> backbone-only state dict')
    parser.add_argument('src', help='pretraining checkpoint (official full '
                        'MAE file or one from tools/train.py)')
    parser.add_argument('dst', help='output file, e.g. *_clean.pth')
    parser.add_argument('--prefix', default='backbone.',
                        help='prefix of the encoder keys (default: '
                        'backbone.)')
    parser.add_argument('--drop-cls-token', action='store_true',
                        help='leave cls_token out (fine-tuning ignores it '
                        'anyway; official clean files keep it)')
    parser.add_argument('--dtype', choices=['float32', 'float16', 'bfloat16'],
                        help='cast the weights (default: keep)')
    add_debug_argument(parser)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    convert_pretrain_to_clean(
        args.src, args.dst, prefix=args.prefix,
        keep_cls_token=not args.drop_cls_token,
        dtype=getattr(torch, args.dtype) if args.dtype else None)


if __name__ == '__main__':
    run_cli(main, prog='tools/convert_pretrain_to_clean.py')
