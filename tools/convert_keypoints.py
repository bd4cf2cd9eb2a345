#!/usr/bin/env python
"""Convert saved pose results to COCO-17, COCO-WholeBody-133 or OpenPose.

Reads the pose JSON the inferencer writes (``OUT_DIR/pose/<name>.json``, any
of the 17 / 133 / 308-keypoint layouts) and writes the same frame in the
chosen format; ``--draw`` also writes the ControlNet-style OpenPose skeleton
image next to it.

Example::

    python tools/convert_keypoints.py outputs/pose --format openpose \\
        --out-dir outputs/openpose --draw

Folders are searched recursively for ``*.json``; the output keeps each
file's path relative to its input folder.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import List, Optional, Tuple

from sapiens_mm.cli import add_debug_argument, run_cli


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse the command line."""
    p = argparse.ArgumentParser(
        description='Convert sapiens_mm pose JSON to another keypoint '
        'layout.', epilog='Formats: coco17 and coco_wholebody keep the '
        'record schema of the input (keypoints [x, y, score] * K in the '
        'target order, missing keypoints 0, 0, 0); openpose writes OpenPose '
        'JSON (pose_keypoints_2d: 18 body points, face_keypoints_2d: 70, '
        'hand_left/right_keypoints_2d: 21 each), as ControlNet tools read.',
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('inputs', nargs='+',
                   help='pose .json files or folders of them')
    p.add_argument('--format', required=True,
                   choices=('coco17', 'coco_wholebody', 'openpose'),
                   help='target format')
    p.add_argument('--out-dir', required=True, help='output folder')
    p.add_argument('--draw', action='store_true',
                   help='also write the ControlNet-style OpenPose skeleton '
                   '(<name>_openpose.png, black canvas of the image size)')
    p.add_argument('--kpt-thr', type=float, default=0.3,
                   help='score below which --draw leaves a point out '
                   '(default: %(default)s)')
    add_debug_argument(p)
    return p.parse_args(argv)


def _inputs(paths: List[str]) -> List[Tuple[Path, Path]]:
    """(file, path relative to its input) pairs."""
    out = []
    for text in paths:
        path = Path(text)
        if path.is_dir():
            files = sorted(path.rglob('*.json'))
            if not files:
                raise ValueError(f'No .json files in {path}.')
            out += [(f, f.relative_to(path)) for f in files]
        elif path.is_file():
            out.append((path, Path(path.name)))
        else:
            raise ValueError(f'{path} does not exist.')
    return out


def run(args: argparse.Namespace) -> List[Path]:
    """Convert every input; return the written files.

    Each input is converted (and, with ``--draw``, its canvas size checked
    against the image limits and drawn) before any of its outputs is
    written; files are written atomically.
    """
    import cv2

    from sapiens_mm.datasets.keypoint_formats import (
        convert_pose_record,
        pose_record_arrays,
        pose_record_canvas,
    )
    from sapiens_mm.engine.fileio import atomic_write
    from sapiens_mm.visualization.openpose import draw_openpose
    written = []
    for src, rel in _inputs(args.inputs):
        try:
            record = json.loads(src.read_text())
        except ValueError as e:
            raise ValueError(f'{src}: not JSON ({e})') from None
        if args.draw or args.format == 'openpose':  # messages name src
            canvas = pose_record_canvas(record, str(src))
        try:
            doc = convert_pose_record(record, args.format)
            if args.draw:
                kpts, scores, names = pose_record_arrays(record)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ValueError(f'{src}: {e}') from None
        outputs = []
        dst = Path(args.out_dir) / rel
        if args.draw:
            img = draw_openpose(kpts, scores, names, canvas,
                                kpt_thr=args.kpt_thr)
            ok, png = cv2.imencode('.png', img)
            if not ok:
                raise ValueError(f'{src}: could not encode the drawing.')
            outputs.append((dst.with_name(dst.stem + '_openpose.png'),
                            png.tobytes()))
        outputs.insert(0, (dst, json.dumps(doc)))
        for path, data in outputs:
            atomic_write(data, path)
            written.append(path)
    return written


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point (errors are turned into one line by ``run_cli``)."""
    args = parse_args(argv)
    written = run(args)
    print(f'wrote {len(written)} file(s) to {args.out_dir}')
    return 0


if __name__ == '__main__':
    sys.exit(run_cli(main, prog='tools/convert_keypoints.py'))
