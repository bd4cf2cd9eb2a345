"""Whether ``sapiens_mm`` was imported as itself.

A folder named ``sapiens_mm`` without ``__init__.py`` that comes first on
``sys.path`` (a clone's root beside the script that imports it, or the
current folder) is taken by Python as a namespace package of that name, in
place of the real one: ``sapiens_mm/__init__.py`` then never runs (nothing
is registered, mmpretrain's multimodal models are not kept off), while the
submodules still load when the package was installed by an import hook
(setuptools' default editable mode). ``tools/setup_env.sh`` installs the
checkout with ``editable_mode=compat`` (the checkout on ``sys.path``), where
the real package wins; for other installs, the first of our modules to load
says so in one line (:func:`check_package_origin`).
"""
import sys

__all__ = ['check_package_origin']


def check_package_origin() -> None:
    """Refuse to go on when ``sapiens_mm`` in ``sys.modules`` is a namespace
    package (see the module docstring).

    Raises:
        ImportError: One line: what shadows the package and how to fix it.
    """
    package = sys.modules.get('sapiens_mm')
    if package is None or getattr(package, '__file__', None) is not None:
        return
    where = ', '.join(str(p) for p in getattr(package, '__path__', ()))
    raise ImportError(
        f'sapiens_mm is shadowed by the folder {where or "?"}, which Python '
        'took for the package (a folder named sapiens_mm without '
        '__init__.py, e.g. the clone beside your script), so its '
        '__init__.py never ran: reinstall with tools/setup_env.sh (the '
        'checkout on sys.path), or run from another folder.')
