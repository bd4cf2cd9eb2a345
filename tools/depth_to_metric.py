#!/usr/bin/env python
"""Make a relative depth map metric, and optionally a coloured point cloud.

Fits ``metres = scale * relative + shift`` (``--inverse``: ``1 / metres``)
by least squares on points of known depth, writes the metric depth map and
reports the fit residual. With intrinsics (``--fx --fy --cx --cy`` or
``--fov``) it also back-projects the map to a ``.ply`` point cloud, coloured
from ``--image``, with normals derived from the depth (``--normals``).

Example::

    python tools/infer.py photo.jpg --depth DEPTH_CKPT --out-dir out
    python tools/depth_to_metric.py out/depth/photo.npy \\
        --points known.csv --out out/photo_metric \\
        --image photo.jpg --fov 60 --normals

``known.csv`` has one ``x, y, metres`` row per known pixel (a header row is
allowed); ``--sparse-depth`` takes a sparse depth image instead (``.npy`` in
metres, or a 16-bit PNG in millimetres; 0 = unknown).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import List, Optional

from sapiens_mm.cli import add_debug_argument, run_cli


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse the command line."""
    p = argparse.ArgumentParser(
        description='Fit scale and shift from relative depth to metres on '
        'known points; write the metric depth, the fit and a .ply.',
        epilog='Outputs: OUT.npy (float32 metres, NaN where unknown), '
        'OUT_fit.json (scale, shift, residuals) and with intrinsics OUT.ply '
        '(binary PLY, OpenCV camera frame: X right, Y down, Z forward).',
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('depth', help='relative depth map (.npy, H x W; NaN = '
                   'invalid), e.g. the inferencer\'s depth/<name>.npy')
    known = p.add_mutually_exclusive_group(required=True)
    known.add_argument('--points', metavar='CSV',
                       help='CSV of known points: x, y (pixels), metres')
    known.add_argument('--sparse-depth', metavar='FILE',
                       help='sparse metric depth image of the same size: '
                       '.npy in metres or 16-bit PNG (see --png-scale); '
                       '0 = unknown')
    p.add_argument('--png-scale', type=float, default=1000.0,
                   help='PNG sparse depth units per metre (default: '
                   '%(default)s, millimetres)')
    p.add_argument('--inverse', action='store_true',
                   help='the map is inverse depth (larger = nearer)')
    p.add_argument('--out', required=True, metavar='PREFIX',
                   help='output prefix: PREFIX.npy, PREFIX_fit.json, '
                   'PREFIX.ply')
    cam = p.add_argument_group('point cloud (needs intrinsics)')
    for name in ('fx', 'fy', 'cx', 'cy'):
        cam.add_argument(f'--{name}', type=float, default=None,
                         help=f'{name} in pixels')
    cam.add_argument('--fov', type=float, default=None,
                     help='field of view in degrees (principal point at the '
                     'image centre, square pixels)')
    cam.add_argument('--fov-axis', choices=('x', 'y', 'diagonal'),
                     default='x', help='extent the --fov spans (default: '
                     '%(default)s)')
    cam.add_argument('--image', default=None,
                     help='image to colour the points with (same size)')
    cam.add_argument('--normals', action='store_true',
                     help='write normals derived from the depth')
    cam.add_argument('--ascii', action='store_true',
                     help='ASCII PLY instead of binary')
    add_debug_argument(p)
    args = p.parse_args(argv)
    given = [getattr(args, n) is not None for n in ('fx', 'fy', 'cx', 'cy')]
    if any(given) and not all(given):
        p.error('give all of --fx --fy --cx --cy, or --fov')
    if all(given) and args.fov is not None:
        p.error('give either --fx --fy --cx --cy or --fov, not both')
    if (args.image or args.normals) and not (all(given) or args.fov):
        p.error('--image / --normals need intrinsics (--fx --fy --cx --cy '
                'or --fov)')
    return args


def _read_sparse(path: str, png_scale: float):
    """A sparse depth map in metres from a ``.npy`` file or a 16-bit PNG
    (``png_scale`` units per metre), decoded by Pillow at the size checked
    against the image limits (one decoder reads the size and decodes)."""
    import numpy as np
    from PIL import Image

    from sapiens_mm.utils.image_io import check_image_size
    if path.endswith('.npy'):
        return np.load(path, allow_pickle=False)
    try:
        with Image.open(path) as img:
            check_image_size(*img.size, path)
            depth = np.asarray(img)
    except (OSError, SyntaxError) as e:
        raise ValueError(f'Cannot read the sparse depth image {path} ({e}).'
                         ) from None
    if depth.ndim != 2 or depth.dtype != np.uint16:
        raise ValueError(f'{path} is not a single-channel 16-bit PNG '
                         f'(got {depth.dtype}, shape {depth.shape}).')
    return depth.astype(np.float64) / png_scale


def run(args: argparse.Namespace) -> dict:
    """Fit, write the outputs, return a summary."""
    import numpy as np

    from sapiens_mm.utils.image_io import UnreadableImageError, read_image
    from sapiens_mm.utils.metric_depth import (
        apply_scale_shift,
        fit_scale_shift,
        known_points_from_csv,
        known_points_from_sparse_depth,
    )
    from sapiens_mm.utils.pointcloud import (
        backproject,
        camera_matrix,
        intrinsics_from_fov,
        normals_from_depth,
        write_ply,
    )
    rel = np.load(args.depth, allow_pickle=False)
    if rel.ndim != 2:
        raise ValueError(f'{args.depth} is not an (H, W) depth map (shape '
                         f'{rel.shape}).')
    if args.points:
        x, d = known_points_from_csv(args.points, rel)
    else:
        x, d = known_points_from_sparse_depth(
            _read_sparse(args.sparse_depth, args.png_scale), rel)
    fit = fit_scale_shift(x, d, inverse=args.inverse)
    metric = apply_scale_shift(rel, fit)
    np.save(args.out + '.npy', metric)
    summary = dict(fit.to_dict(), depth=args.depth, out=args.out + '.npy')
    if args.fov is not None or args.fx is not None:
        h, w = metric.shape
        K = (intrinsics_from_fov(args.fov, w, h, args.fov_axis)
             if args.fov is not None else camera_matrix(
                 args.fx, args.fy, args.cx, args.cy))
        colors = None
        if args.image:
            try:
                img = read_image(args.image, backend='cv2')
            except UnreadableImageError as e:
                raise ValueError(f'Cannot read the image {args.image}: {e}'
                                 ) from None
            if img.shape[:2] != metric.shape:
                raise ValueError(
                    f'The image is {img.shape[1]}x{img.shape[0]} but the '
                    f'depth map {w}x{h}: give the image the depth was '
                    'predicted from.')
            colors = img[..., ::-1]
        normals = normals_from_depth(metric, K) if args.normals else None
        n = write_ply(args.out + '.ply', backproject(metric, K), colors,
                      normals, ascii=args.ascii)
        summary.update(ply=args.out + '.ply', ply_points=n,
                       K=K.round(6).tolist())
    with open(args.out + '_fit.json', 'w') as f:
        json.dump(summary, f, indent=2)
    return summary


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point (errors are turned into one line by ``run_cli``)."""
    args = parse_args(argv)
    s = run(args)
    kind = '1 / metres' if s['inverse'] else 'metres'
    print(f'{kind} = {s["scale"]:.6g} * relative + {s["shift"]:.6g} from '
          f'{s["num_points"]} points: residual RMS {s["rmse_m"]:.4g} m, max '
          f'{s["max_abs_m"]:.4g} m ({100 * s["rel_rmse"]:.2f} % RMS)')
    print(f'wrote {s["out"]}, {args.out}_fit.json' +
          (f', {s["ply"]} ({s["ply_points"]} points)' if 'ply' in s else ''))
    return 0


if __name__ == '__main__':
    sys.exit(run_cli(main, prog='tools/depth_to_metric.py'))
