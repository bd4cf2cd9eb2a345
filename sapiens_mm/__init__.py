"""sapiens_mm: OpenMMLab plugin suite for Sapiens human vision models.

``import sapiens_mm`` calls :func:`register_all_modules`: it checks the
installed OpenMMLab stack, keeps mmpretrain's multimodal models off when
Transformers 5 is installed (they do not import under it; see
:mod:`sapiens_mm.utils.mmpretrain_compat`), then registers every module it
provides into the upstream registries (mmpretrain, mmpose, mmseg, mmengine)
and adds mmengine's ``hf://`` checkpoint scheme (Hub files; local files keep
mmengine's loader outside :func:`sapiens_mm.zoo.safe_checkpoint_loading`,
see :mod:`sapiens_mm.zoo.loader`). A config's
``custom_imports=dict(imports=['sapiens_mm'])`` does the same.

The one import that waits is the package's own command line: when
:mod:`runpy` imports the package to run :mod:`sapiens_mm.__main__` as the
program (``python -m sapiens_mm``, ``tools/infer.py``), the registration is
left to that program, which checks its arguments first (``--help`` and
argument errors answer without loading torch or the OpenMMLab packages) and
then calls :func:`register_all_modules` before it runs anything else. No
other code runs in between, so no code sees the package unregistered. The
import reads no command line: it only asks which code is importing it.
"""
import sys

from .version import __version__

_registered = False


def register_all_modules() -> None:
    """Register every module of sapiens_mm into the upstream registries and
    add mmengine's ``hf://`` checkpoint scheme (see the module docstring).
    Runs once; later calls return at once.

    Raises:
        ImportError: A required package is missing or of an unsupported
            version (the message names it and the accepted range).
    """
    global _registered
    if _registered:
        return
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
    _registered = True


def _imported_to_run_as_program() -> bool:
    """Whether :mod:`runpy` is importing this package as the first step of
    running :mod:`sapiens_mm.__main__` as the main program: ``python -m
    sapiens_mm`` (``runpy._run_module_as_main``) or ``tools/infer.py``
    (``runpy.run_module('sapiens_mm', run_name='__main__')``).

    Read from the frames of the importing code, not from the command line:
    a program of the user that imports sapiens_mm, or runs it through
    ``runpy`` under another name (multiprocessing's ``__mp_main__``), gets
    the registration at import as always.
    """
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_globals.get('__name__') == 'runpy' and \
                frame.f_code.co_name in ('_run_module_as_main', 'run_module'):
            local = frame.f_locals
            return (local.get('mod_name') in ('sapiens_mm',
                                              'sapiens_mm.__main__')
                    and local.get('run_name', '__main__') == '__main__')
        frame = frame.f_back
    return False


if not _imported_to_run_as_program():
    register_all_modules()


def get_config(name: str):
    """A shipped config by name, e.g.
    ``sapiens_mm.get_config('sapiens_0.3b-210e_goliath-1024x768')`` (see
    :func:`sapiens_mm.zoo.get_config`)."""
    from .zoo import get_config as zoo_get_config
    return zoo_get_config(name)


__all__ = ['__version__', 'get_config', 'register_all_modules']
