"""Convert a Sapiens2 checkpoint between the official and the Hugging Face
Transformers layouts.

The official layout is one ``.safetensors`` file (``backbone.*`` +
``decode_head.*``, or flat backbone keys for a pretrain file); the
Transformers layout is a folder with ``config.json`` and
``model.safetensors`` that ``transformers.Sapiens2For*.from_pretrained``
loads. Either is read by every sapiens_mm loader without conversion; convert
to hand a model to the other ecosystem.

Examples:
    # official (or a checkpoint of tools/train.py) -> Transformers folder
    python tools/convert_checkpoint.py sapiens2_0.4b_pose.safetensors \\
        sapiens2-pose-0.4b-hf --to transformers
    # Transformers folder (or its model.safetensors) -> official file
    python tools/convert_checkpoint.py sapiens2-pose-0.4b-hf \\
        sapiens2_0.4b_pose.safetensors --to official

The source may also be a registry name (``sapiens2-pose-0.4b``, downloaded).
The destination must not exist.
"""
import argparse
import os.path as osp
import sys

from sapiens_mm.cli import add_debug_argument, run_cli


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description='Convert a Sapiens2 checkpoint between the official '
        'layout (.safetensors) and the Transformers layout (config.json + '
        'model.safetensors folder).')
    p.add_argument('src', help='checkpoint file or Transformers folder, or a '
                   'registry model name')
    p.add_argument('dst', help='output: a .safetensors file (--to official) '
                   'or a folder (--to transformers); must not exist')
    p.add_argument('--to', required=True, choices=('official', 'transformers'),
                   help='layout to write')
    p.add_argument('--image-size', type=int, nargs=2, default=(1024, 768),
                   metavar=('H', 'W'),
                   help='input size written to config.json (Transformers; '
                   'default: %(default)s)')
    add_debug_argument(p)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    import sapiens_mm  # noqa: F401
    from sapiens_mm.checkpoint import (
        get_state_dict,
        load_file,
        official_head_keys,
        save_safetensors,
        save_transformers_checkpoint,
    )
    from sapiens_mm.zoo.hub import resolve_checkpoint
    if osp.lexists(args.dst):
        raise FileExistsError(f'{args.dst} exists; choose a new destination '
                              '(nothing is overwritten).')
    src, _ = resolve_checkpoint(args.src)  # a file, folder or model name
    state = official_head_keys(get_state_dict(load_file(src)))
    if args.to == 'transformers':
        config = save_transformers_checkpoint(state, args.dst,
                                              tuple(args.image_size))
        print(f'wrote {args.dst} ({config["architectures"][0]}, '
              f'{len(state)} official tensors)')
    else:
        if not args.dst.endswith('.safetensors'):
            raise ValueError(f'{args.dst}: the official layout is a '
                             '.safetensors file; end the name with it.')
        save_safetensors(state, args.dst)
        print(f'wrote {args.dst} ({len(state)} tensors)')


if __name__ == '__main__':
    run_cli(main, sys.argv[1:], 'tools/convert_checkpoint.py')
