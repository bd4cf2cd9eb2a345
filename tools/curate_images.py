"""Keep the images of a folder that show a person (Sapiens data filter).

Writes <out-dir>/manifest.txt (kept images, paths relative to the folder),
which UnlabeledImageDataset reads as ann_file, plus decisions.jsonl (for
resuming), report.json and meta.json.

Examples:
    # built-in OpenCV detector, no download
    python tools/curate_images.py data/humans
    # mmdet person detector with the paper thresholds (score 0.9, 300 px)
    python tools/curate_images.py data/humans \\
        --det-model rtmdet_m_640-8xb32_coco-person.py \\
        --det-weights rtmdet_m_8xb32-100e_coco-obj365-person-235e8209.pth \\
        --device cuda:0
Run it again to continue an interrupted run: decided images are skipped.
"""
import argparse

import sapiens_mm  # noqa: F401  (safe checkpoint loading)
from sapiens_mm.datasets.curation import curate_images
from sapiens_mm.detection import build_person_detector
from sapiens_mm.cli import add_debug_argument, run_cli


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Keep the images that show a person and write a '
        'manifest for MAE pretraining.')
    parser.add_argument('root', help='image folder (scanned recursively for '
                        'jpg / jpeg / png / bmp / tif / tiff / webp)')
    parser.add_argument('--out-dir', help='output folder (default: '
                        '<root>/curation)')
    parser.add_argument('--det-model', '--det-config', dest='det_model',
                        help='mmdet detector config; without it the built-in '
                        'OpenCV face detector runs')
    parser.add_argument('--det-weights', '--det-checkpoint',
                        dest='det_weights', help='mmdet detector checkpoint')
    parser.add_argument('--device', default='cpu',
                        help='device of the mmdet detector (default: cpu)')
    parser.add_argument('--person-label', type=int, default=0,
                        help='class index of "person" for the mmdet '
                        'detector (default: 0, as in COCO)')
    parser.add_argument(
        '--score-thr', type=float,
        help='minimum detection score (default: 0.9 for mmdet, as in the '
        'paper; 15 votes for the built-in detector, whose score is the '
        'number of merged cascade windows, not a probability)')
    parser.add_argument(
        '--min-box-size', type=float,
        help='minimum longer side of the box in pixels (default: 300 for '
        'mmdet person boxes, as in the paper; 64 for the built-in '
        "detector's face boxes)")
    parser.add_argument('--restart', action='store_true',
                        help='forget earlier decisions in --out-dir and '
                        'detect every image again')
    parser.add_argument('--no-progress', action='store_true',
                        help='no progress bar')
    add_debug_argument(parser)
    args = parser.parse_args(argv)
    if bool(args.det_model) != bool(args.det_weights):
        parser.error('give both --det-model and --det-weights (or '
                     'neither, for the built-in OpenCV detector)')
    return args


def main(argv=None):
    args = parse_args(argv)
    detector = build_person_detector('face', args.det_model,
                                     args.det_weights, args.device,
                                     args.person_label)
    report = curate_images(
        args.root, args.out_dir, detector, score_thr=args.score_thr,
        min_box_size=args.min_box_size, restart=args.restart,
        progress=not args.no_progress)
    print(report.summary())


if __name__ == '__main__':
    run_cli(main, prog='tools/curate_images.py')
