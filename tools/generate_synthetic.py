#!/usr/bin/env python
"""Write a synthetic human dataset (images + exact labels for every task).

Example::

    python tools/generate_synthetic.py data/synthetic --num-train 2000 \\
        --num-val 200 --seed 0

writes ``<out_dir>/{train,val}/{images,masks,depths,normals,annotations}``;
see :mod:`sapiens_mm.datasets.synthetic.writer` for the exact format.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import List, Optional

FORMAT = """\
output layout (per split, train and val):
  images/<stem>.png       RGB uint8, HxW
  masks/<stem>.png        uint8 goliath_28 class ids (0 = background)
  depths/<stem>.npy       float32 HxW camera-frame z (metres), 0 = background
  normals/<stem>.npy      float32 HxWx3 unit camera-frame normals, 0 = bg
  annotations/goliath_308.json, annotations/coco_17.json  (COCO keypoints)
camera: OpenCV (X right, Y down, Z forward); per-image intrinsics in the
'cam_K' field of each COCO image entry; normals face the camera (n_z < 0).
The same seed always gives byte-identical files."""


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(
        description='Render synthetic people with exact keypoint, part-mask, '
        'depth and normal labels, split into train and val.',
        epilog=FORMAT, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('out_dir', type=Path, help='output folder')
    parser.add_argument('--num-train', type=int, default=1000,
                        help='number of training images (default: 1000)')
    parser.add_argument('--num-val', type=int, default=100,
                        help='number of validation images (default: 100)')
    parser.add_argument('--seed', type=int, default=0,
                        help='dataset seed (default: 0)')
    parser.add_argument('--height', type=int, default=256,
                        help='image height in pixels (default: 256)')
    parser.add_argument('--width', type=int, default=192,
                        help='image width in pixels (default: 192)')
    parser.add_argument('--max-people', type=int, default=3,
                        help='maximum number of people per image (default: 3)')
    parser.add_argument('--workers', type=int, default=0,
                        help='worker processes, 0 = render in this process '
                        '(default: 0); the files do not depend on it')
    parser.add_argument('--matting', action='store_true',
                        help='soft-edged people plus alphas/, fgs/ and bgs/ '
                        'folders (matting ground truth)')
    parser.add_argument('--no-progress', action='store_true',
                        help='hide the progress bar')
    args = parser.parse_args(argv)
    for name in ('num_train', 'num_val', 'workers'):
        if getattr(args, name) < 0:
            parser.error(f'--{name.replace("_", "-")} must be >= 0')
    if args.height < 8 or args.width < 8:
        parser.error('--height and --width must be at least 8')
    if args.max_people < 1:
        parser.error('--max-people must be at least 1')
    return args


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point; returns the process exit code."""
    args = parse_args(argv)
    from sapiens_mm.datasets.synthetic import write_dataset

    start = time.perf_counter()
    counts = write_dataset(args.out_dir, args.num_train, args.num_val,
                           seed=args.seed, size=(args.height, args.width),
                           max_people=args.max_people,
                           num_workers=args.workers,
                           progress=not args.no_progress,
                           matting=args.matting)
    n = args.num_train + args.num_val
    dt = time.perf_counter() - start
    print(f'wrote {n} images ({counts["train"]} train / {counts["val"]} val '
          f'person annotations) to {args.out_dir} in {dt:.1f} s')
    return 0


if __name__ == '__main__':
    sys.exit(main())
