"""Command line of :func:`~sapiens_mm.deploy.export_model`, used by
``tools/deploy/export.py``."""
import argparse
from typing import Dict, Optional, Sequence

from sapiens_mm.deploy.export import DEFAULT_OPSET, MIN_OPSET

__all__ = ['build_parser', 'main', 'cli']


def build_parser(prog: Optional[str] = None) -> argparse.ArgumentParser:
    """The argument parser of the export CLI."""
    p = argparse.ArgumentParser(
        prog=prog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            'Export a Sapiens pose / seg / depth / normal model (backbone + '
            'head, normalisation inside) to ONNX and / or torch.export '
            '(.pt2) with a dynamic batch dimension.'),
        epilog=(
            'The graph takes float32 (N, 3, H, W) BGR images with values '
            '0-255 and returns the raw head output (pose heatmaps with the '
            'flip test inside, seg logits, depth, normals). Task, input size, '
            'mean/std, output stride, keypoint / class names, codec and the '
            'config are stored in the ONNX metadata and in <name>.pt2 (plus '
            'the sidecar <name>.pt2.json).\n\n'
            'Example:\n  python tools/deploy/export.py --config '
            'configs/pose/goliath/sapiens_0.3b-210e_goliath-1024x768.py '
            '--checkpoint sapiens_0.3b_goliath_best_goliath_AP_573.pth '
            '--format both --out-dir exported'))
    p.add_argument('--config',
                   required=True,
                   help='task config (configs/pose|seg|depth|normal/...)')
    p.add_argument('--checkpoint',
                   default=None,
                   help='weights; without it the model is exported with '
                   'random weights')
    p.add_argument('--format',
                   choices=('onnx', 'pt2', 'both'),
                   default='both',
                   help='what to write (default: '
                   '%(default)s)')
    p.add_argument('--out-dir',
                   default='exported',
                   help='output folder (default: %(default)s)')
    p.add_argument('--name',
                   default=None,
                   help='file stem (default: the config file name)')
    p.add_argument('--input-size',
                   type=int,
                   nargs=2,
                   default=None,
                   metavar=('H', 'W'),
                   help='input height and width, multiples of 16 (default: '
                   'the config\'s, 1024 768 for the released sizes)')
    p.add_argument('--opset',
                   type=int,
                   default=DEFAULT_OPSET,
                   help=f'ONNX opset, {MIN_OPSET} or newer (default: '
                   '%(default)s)')
    p.add_argument('--max-batch',
                   type=int,
                   default=1024,
                   help='largest batch the exported graph accepts '
                   '(default: %(default)s)')
    from sapiens_mm.cli import add_debug_argument
    add_debug_argument(p)
    return p


def main(argv: Optional[Sequence[str]] = None,
         prog: Optional[str] = None) -> Dict[str, str]:
    """Parse ``argv`` and export.

    Returns:
        The written files, as :func:`~sapiens_mm.deploy.export_model`.
    """
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.opset < MIN_OPSET:
        parser.error(f'--opset {args.opset} is not supported: use '
                     f'{MIN_OPSET} or newer.')
    from mmengine.logging import print_log

    from sapiens_mm.deploy.export import export_model
    from sapiens_mm.engine.fileio import ensure_writable_dir
    ensure_writable_dir(args.out_dir, 'output folder (--out-dir)')
    formats = ('onnx', 'pt2') if args.format == 'both' else (args.format, )
    files = export_model(
        args.config,
        args.checkpoint,
        args.out_dir,
        formats=formats,
        input_size=tuple(args.input_size) if args.input_size else None,
        opset=args.opset,
        name=args.name,
        max_batch=args.max_batch)
    for kind, path in files.items():
        print_log(f'{kind}: {path}', logger='current')
    return files


def cli(argv: Optional[Sequence[str]] = None,
        prog: Optional[str] = None) -> Dict[str, str]:
    """:func:`main` for a command line: a user error ends with one line and
    exit code 1 (the traceback with ``--debug``)."""
    from sapiens_mm.cli import run_cli
    return run_cli(lambda a: main(a, prog), argv, prog)
