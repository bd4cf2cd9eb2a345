"""Draw MAE reconstructions of images: original | masked | reconstruction.

Example:
    python tools/mae_visualize.py \\
        configs/pretrain/sapiens_0.3b-mae-1600e_humans-1024x1024.py \\
        checkpoints/sapiens_0.3b/sapiens_0.3b_epoch_1600.pth \\
        demo/images/ --out outputs/mae_grid.png --num 4 --seed 0
The checkpoint must be a full MAE checkpoint (encoder and decoder), not a
*_clean.pth file.
"""
import argparse
import os
import os.path as osp

import cv2
import torch
from mmengine.config import Config, DictAction
from mmpretrain.registry import MODELS

import sapiens_mm  # noqa: F401  (registers modules)
from sapiens_mm.checkpoint import load_checkpoint
from sapiens_mm.utils.image_io import list_images, read_image
from sapiens_mm.models.selfsup import prepare_images, reconstruction_grid
from sapiens_mm.cli import add_debug_argument, run_cli


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='MAE reconstruction grid of some images')
    parser.add_argument('config', help='pretraining config')
    parser.add_argument('checkpoint', help='full MAE checkpoint')
    parser.add_argument('inputs', nargs='+',
                        help='image files and/or folders (recursive)')
    parser.add_argument('--out', default='outputs/mae_reconstruction.png',
                        help='output image (default: %(default)s)')
    parser.add_argument('--num', type=int, default=8,
                        help='at most this many images (rows)')
    parser.add_argument('--mask-ratio', type=float,
                        help="default: the config's (0.75)")
    parser.add_argument('--seed', type=int, default=0,
                        help='seed of the random masks')
    parser.add_argument('--raw-prediction', action='store_true',
                        help='show the prediction on visible patches too '
                        '(default: paste the original visible patches)')
    parser.add_argument('--device', default='cpu')
    parser.add_argument('--cfg-options', nargs='+', action=DictAction)
    add_debug_argument(parser)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    files = []
    for item in args.inputs:
        if osp.isdir(item):
            files += [osp.join(item, p) for p in list_images(item)]
        else:
            files.append(item)
    files = files[:args.num]
    if not files:
        raise SystemExit('No images found in ' + ' '.join(args.inputs))
    cfg = Config.fromfile(args.config)
    if args.cfg_options:
        cfg.merge_from_dict(args.cfg_options)
    cfg.model.pop('init_cfg', None)
    model = MODELS.build(cfg.model)
    load_checkpoint(model, args.checkpoint)
    model.to(args.device).eval()
    torch.manual_seed(args.seed)
    inputs = prepare_images(model, [read_image(f) for f in files])
    grid = reconstruction_grid(model, inputs, args.mask_ratio,
                               paste_visible=not args.raw_prediction)
    os.makedirs(osp.dirname(osp.abspath(args.out)), exist_ok=True)
    cv2.imwrite(args.out, cv2.cvtColor(grid, cv2.COLOR_RGB2BGR))
    print(f'Wrote {args.out} ({len(files)} rows: original | masked | '
          'reconstruction)')


if __name__ == '__main__':
    run_cli(main, prog='tools/mae_visualize.py')
