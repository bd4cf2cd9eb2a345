"""sapiens_mm: OpenMMLab plugin suite for Sapiens human vision models.

``import sapiens_mm`` checks the installed OpenMMLab stack, keeps
mmpretrain's multimodal models off when Transformers 5 is installed (they do
not import under it; see :mod:`sapiens_mm.utils.mmpretrain_compat`), then
registers every module it provides into the upstream registries
(mmpretrain, mmpose, mmseg, mmengine) and adds mmengine's ``hf://``
checkpoint scheme (Hub files; local files keep mmengine's loader outside
:func:`sapiens_mm.zoo.safe_checkpoint_loading`, see
:mod:`sapiens_mm.zoo.loader`); except in ``python -m sapiens_mm --help``,
which only prints the help.
"""
import sys
from typing import List, Optional

from .version import __version__


def _cli_args() -> Optional[List[str]]:
    """The arguments of the inference command line when this process is
    ``python -m sapiens_mm ...`` or ``python tools/infer.py ...``, else
    None.

    The package is imported before the command line's own code runs, so
    what the command line needs first is decided here: its help needs none
    of the modules below (whose imports, torch and the OpenMMLab packages,
    take seconds), and its runs hide other packages' import-time warnings
    unless ``--verbose`` (see
    :func:`sapiens_mm.cli.common.third_party_warnings`).
    """
    argv = list(getattr(sys, 'orig_argv', ()))
    i = 1  # the interpreter's options, then the module or script
    while i < len(argv) and argv[i].startswith('-') and argv[i] != '-m':
        i += 2 if argv[i] in ('-X', '-W', '--check-hash-based-pycs') else 1
    if argv[i:i + 2] == ['-m', 'sapiens_mm']:
        args = argv[i + 2:]
    elif i < len(argv) and argv[i].replace('\\', '/').endswith(
            'tools/infer.py'):
        args = argv[i + 1:]
    else:
        return None
    return args[:args.index('--')] if '--' in args else args


_CLI = _cli_args()
if _CLI is not None and '--verbose' not in _CLI:
    from .cli.common import hide_third_party_warnings

    hide_third_party_warnings()


if _CLI is None or not {'-h', '--help'} & set(_CLI):
    from .utils.mmpretrain_compat import keep_multimodal_off
    from .utils.version_check import check_versions

    check_versions()
    keep_multimodal_off()

    from . import checkpoint  # noqa: F401
    from . import codecs  # noqa: F401
    from . import datasets  # noqa: F401
    from . import engine  # noqa: F401
    from . import evaluation  # noqa: F401
    from . import models  # noqa: F401
    from .zoo.loader import register_mmengine_loaders

    register_mmengine_loaders()


def get_config(name: str):
    """A shipped config by name, e.g.
    ``sapiens_mm.get_config('sapiens_0.3b-210e_goliath-1024x768')`` (see
    :func:`sapiens_mm.zoo.get_config`)."""
    from .zoo import get_config as zoo_get_config
    return zoo_get_config(name)


__all__ = ['__version__', 'get_config']
