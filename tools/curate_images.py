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
    # split across 8 GPUs (torchrun), resumable, same manifest.txt
    bash tools/dist_infer.sh 8 tools/curate_images.py data/humans \
        --det-model ... --det-weights ... --device cuda
Run it again to continue an interrupted run: decided images are skipped.
A sharded run (--launcher pytorch / slurm, or a plain run over its
--out-dir) exits with code 75 when SIGTERM stopped it (requeue to resume).
"""
import argparse
import os.path as osp
import sys

import sapiens_mm  # noqa: F401  (safe checkpoint loading)
from sapiens_mm.cli import add_debug_argument, run_cli
from sapiens_mm.datasets.curation import curate_images
from sapiens_mm.detection import build_person_detector
from sapiens_mm.engine.sharded import (LAUNCHERS, MANIFEST_DIR,
                                       REQUEUE_EXIT_CODE, RunStopped,
                                       curate_images_sharded,
                                       init_distributed, local_device)


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
    parser.add_argument(
        '--launcher', choices=LAUNCHERS, default='none',
        help='pytorch (torchrun, tools/dist_infer.sh) or slurm (srun, '
        'tools/slurm_infer.sh): split the images across the processes, '
        'with per-rank manifests merged into <out-dir>/manifest.jsonl '
        '(default: %(default)s, one process)')
    parser.add_argument('--progress-interval', type=float, default=30.0,
                        metavar='S', help='seconds between the progress '
                        'lines of a sharded run (default: %(default)s)')
    parser.add_argument('--rank-timeout', type=float, default=None,
                        metavar='S', help='seconds without a heartbeat '
                        'after which a sharded run counts a rank as lost '
                        'and stops, naming it (default: '
                        '$SAPIENS_MM_RANK_TIMEOUT, else 600)')
    add_debug_argument(parser)
    args = parser.parse_args(argv)
    if bool(args.det_model) != bool(args.det_weights):
        parser.error('give both --det-model and --det-weights (or '
                     'neither, for the built-in OpenCV detector)')
    return args


def main(argv=None):
    args = parse_args(argv)
    out_dir = args.out_dir or osp.join(args.root, 'curation')
    if args.launcher != 'none' or osp.isfile(
            osp.join(out_dir, MANIFEST_DIR, 'run.json')):
        return main_sharded(args, out_dir)
    detector = build_person_detector('face', args.det_model,
                                     args.det_weights, args.device,
                                     args.person_label)
    report = curate_images(
        args.root, args.out_dir, detector, score_thr=args.score_thr,
        min_box_size=args.min_box_size, restart=args.restart,
        progress=not args.no_progress)
    print(report.summary())


def main_sharded(args, out_dir):
    """The run split across the processes of the job (or resumed by one)."""
    rank, world_size = init_distributed(args.launcher)
    device = args.device
    if args.launcher != 'none' and device.startswith('cuda'):
        device = local_device()  # one process per GPU
    detector = build_person_detector('face', args.det_model,
                                     args.det_weights, device,
                                     args.person_label)
    try:
        report = curate_images_sharded(
            args.root, out_dir, detector, score_thr=args.score_thr,
            min_box_size=args.min_box_size, rank=rank,
            world_size=world_size, restart=args.restart,
            progress_interval=0 if args.no_progress else
            args.progress_interval, rank_timeout=args.rank_timeout)
    except RunStopped:
        print(f'rank {rank}: stopped by SIGTERM, manifest flushed; run the '
              'same command again to resume.', file=sys.stderr)
        sys.exit(REQUEUE_EXIT_CODE)
    finally:
        import torch.distributed as dist
        if dist.is_initialized():
            dist.destroy_process_group()
    if report is not None:
        print(report.summary())


if __name__ == '__main__':
    run_cli(main, prog='tools/curate_images.py')
