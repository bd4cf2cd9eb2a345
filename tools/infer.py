"""Run Sapiens models on images, folders, videos or a webcam.

    .venv/bin/python tools/infer.py photo.jpg --checkpoints \
        sapiens_0.3b_goliath_best_goliath_AP_573.pth --out-dir outputs

See ``.venv/bin/python tools/infer.py --help``; the same CLI is
``python -m sapiens_mm``. Run as a script it runs ``sapiens_mm.__main__``
as the program (through :mod:`runpy`, as ``python -m`` does), so that its
arguments are checked before torch and the OpenMMLab packages load.
"""
import runpy
from typing import List, Optional, Sequence


def cli(argv: Optional[Sequence[str]] = None,
        prog: str = 'tools/infer.py') -> List[dict]:
    """The command line in this process
    (:func:`sapiens_mm.cli.infer.cli`)."""
    from sapiens_mm.cli.infer import cli as run
    return run(argv, prog)


if __name__ == '__main__':
    runpy.run_module('sapiens_mm', run_name='__main__',
                     init_globals=dict(PROG='tools/infer.py'))
