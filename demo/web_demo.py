#!/usr/bin/env python
"""Browser demo: upload an image or use the webcam, pick tasks and models,
see the overlays side by side, download the outputs.

    python demo/web_demo.py                      # tiny models, no download
    python demo/web_demo.py --checkpoints ~/sapiens_ckpts --port 7860

then open the printed address. Checkpoints are files or folders (searched
recursively; ``make demo``'s are in work_dirs/demo and carry their configs);
--<task>-config gives the config of a task's checkpoints that do not carry
one. Each task also offers the shipped tiny config with random weights, so
the demo runs on a fresh machine.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import List, Optional

from sapiens_mm.cli import add_debug_argument, run_cli


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse the command line."""
    p = argparse.ArgumentParser(
        description='Sapiens browser demo (gradio).',
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--checkpoints', nargs='*', default=[], metavar='PATH',
                   help='checkpoint files or folders (official Sapiens '
                   'checkpoints, exported .onnx / .pt2), or released model '
                   'names (sapiens2-pose-0.4b; downloaded when first '
                   'chosen)')
    from sapiens_mm.demo.web import DEMO_TASKS
    for task in DEMO_TASKS:
        p.add_argument(f'--{task}-config', metavar='CFG', default=None,
                       help=f'config of the {task} checkpoints (for files '
                       'that do not carry theirs; also offered alone, with '
                       'random weights)')
    p.add_argument('--device', default=None,
                   help='cpu, cuda or cuda:N (default: cuda if available)')
    p.add_argument('--host', default='127.0.0.1',
                   help='address to listen on (default: %(default)s; '
                   '0.0.0.0 for other machines)')
    p.add_argument('--port', type=int, default=7860,
                   help='port (default: %(default)s)')
    p.add_argument('--out-dir', default=None,
                   help='folder for the outputs of each run (default: a '
                   'temporary folder)')
    p.add_argument('--max-side', type=int, default=1280,
                   help='scale larger inputs down to this long side '
                   '(default: %(default)s)')
    add_debug_argument(p)
    return p.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point (errors are turned into one line by ``run_cli``)."""
    args = parse_args(argv)
    os.environ.setdefault('GRADIO_ANALYTICS_ENABLED', 'False')
    try:
        import gradio  # noqa: F401
    except ImportError:
        raise RuntimeError('The web demo needs gradio: pip install -r '
                           'requirements.txt') from None
    import torch

    from sapiens_mm.demo.web import DEMO_TASKS, build_demo
    from sapiens_mm.utils.cpu_allocator import keep_freed_memory
    configs = {t: getattr(args, f'{t}_config') for t in DEMO_TASKS
               if getattr(args, f'{t}_config')}
    device = args.device or ('cuda' if torch.cuda.is_available() else 'cpu')
    if torch.device(device).type == 'cpu':
        keep_freed_memory()  # a whole program tunes its own process (logged)
    app = build_demo(args.checkpoints, args.device, args.out_dir,
                     args.max_side, configs)
    print(f'Sapiens web demo on http://{args.host}:{args.port}', flush=True)
    app.queue(default_concurrency_limit=1).launch(
        server_name=args.host, server_port=args.port, share=False,
        inbrowser=False, ssr_mode=False, show_error=True, quiet=True)
    return 0


if __name__ == '__main__':
    sys.exit(run_cli(main, prog='demo/web_demo.py'))
