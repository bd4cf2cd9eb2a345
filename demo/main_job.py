"""The project's main job (``make demo``): synthetic people -> fine-tune the
tiny Sapiens arch on pose, body parts, depth and normals -> evaluate before
and after on held-out images -> run inference and write visualisations.

See sapiens_mm/demo/pipeline.py for what it does to the shipped configs.
"""
import argparse
import warnings
from pathlib import Path

import torch

import sapiens_mm  # noqa: F401  (registers everything)
from sapiens_mm.cli import add_debug_argument, run_cli
from sapiens_mm.demo.pipeline import DEMO_TASKS, DemoSettings, run_demo

ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv=None):
    d = DemoSettings()
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--out-dir', default=d.out_dir,
                        help='everything is written below this folder (default: %(default)s)')
    parser.add_argument('--smoke', action='store_true',
                        help='shortened run for CI: 16 + 8 images, '
                        '5 iterations per task (checks that every step '
                        'works, not that the models learn)')
    parser.add_argument('--num-train', type=int, default=d.num_train,
                        help='synthetic training images (default: %(default)s)')
    parser.add_argument('--num-val', type=int, default=d.num_val,
                        help='held-out images (default: %(default)s)')
    parser.add_argument('--size', type=int, nargs=2, default=d.image_size,
                        metavar=('H', 'W'),
                        help='size of the rendered images (default: %(default)s)')
    parser.add_argument('--input-size', type=int, nargs=2, default=None,
                        metavar=('H', 'W'),
                        help='model input size of every task, multiples of 16 '
                        '(default: ' + ', '.join(
                            f'{k} {h}x{w}' for k, (h, w) in d.input_sizes.items())
                        + ')')
    parser.add_argument('--max-people', type=int, default=d.max_people,
                        help='people per image, at most (default: %(default)s)')
    parser.add_argument('--iters', type=int, default=None,
                        help='training iterations for every task (default: '
                        + ', '.join(f'{k} {v}' for k, v in d.iters.items())
                        + ')')
    parser.add_argument('--batch-size', type=int, default=None,
                        help='training batch size for every task (default: '
                        + ', '.join(f'{k} {v}' for k, v in d.batch_sizes.items())
                        + ')')
    parser.add_argument('--lr', type=float, default=d.lr,
                        help='peak learning rate (default: %(default)s)')
    parser.add_argument('--tasks', nargs='+', default=list(d.tasks),
                        choices=list(DEMO_TASKS), help='tasks to train (default: %(default)s)')
    parser.add_argument('--seed', type=int, default=d.seed,
                        help='data and training seed (default: %(default)s)')
    parser.add_argument('--depth-loss', default=d.depth_loss,
                        choices=['DepthScaleShiftLoss', 'DepthSiLogLoss'],
                        help='loss the depth model trains with (default: '
                        '%(default)s; DepthSiLogLoss is the official '
                        'Sapiens loss of the depth configs)')
    parser.add_argument('--workers', type=int, default=d.workers,
                        help='worker processes that render the data (default: %(default)s)')
    add_debug_argument(parser)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    settings = DemoSettings(
        out_dir=args.out_dir, num_train=args.num_train, num_val=args.num_val,
        image_size=tuple(args.size), max_people=args.max_people, lr=args.lr,
        tasks=tuple(args.tasks), seed=args.seed, workers=args.workers,
        depth_loss=args.depth_loss)
    if args.input_size is not None:
        settings.input_sizes = {t: tuple(args.input_size) for t in DEMO_TASKS}
    if args.iters is not None:
        settings.iters = {t: args.iters for t in DEMO_TASKS}
    if args.batch_size is not None:
        settings.batch_sizes = {t: args.batch_size for t in DEMO_TASKS}
    if args.smoke:
        settings.num_train, settings.num_val = 16, 8
        settings.iters = {t: 5 for t in DEMO_TASKS}
        settings.batch_sizes = {t: 4 for t in DEMO_TASKS}
        settings.num_infer = 2
    # The process is this tool's: its thread count, and the OpenMMLab
    # packages' deprecation notices kept out of the console (each task's
    # Runner log in its work_dir still records warnings).
    torch.set_num_threads(settings.threads)
    warnings.filterwarnings('ignore', category=UserWarning)
    warnings.filterwarnings('ignore', category=DeprecationWarning)
    run_demo(settings, str(ROOT / 'configs'),
             echo=lambda text: print(text, flush=True))


if __name__ == '__main__':
    run_cli(main, prog='demo/main_job.py')
