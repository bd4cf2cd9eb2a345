"""The warnings of other packages that say nothing about a sapiens_mm run,
and the scopes that hide or show them.

mmseg warns that ``build_loss`` will be deprecated on every dense model
build, mmpose notes that it found a dataset metainfo file in its own
package, and mmengine's ``import pkg_resources`` makes setuptools warn that
``pkg_resources`` is deprecated. The library hides them only around its own
calls that trigger them (:func:`quiet_upstream_warnings`, a
``warnings.catch_warnings`` scope: the filters are restored on exit); a
command line may hide them for its whole run
(:func:`sapiens_mm.cli.common.hide_third_party_warnings`), and shows them
inside :func:`upstream_warnings_shown` (``--verbose``).
"""
import contextlib
import contextvars
import warnings
from typing import Iterator, Tuple, Type

__all__ = ['UPSTREAM_WARNINGS', 'quiet_upstream_warnings',
           'upstream_warnings_shown']

#: (category, module regex) of the warnings hidden, by the module that
#: issues them (``warnings.filterwarnings``' ``module``).
UPSTREAM_WARNINGS: Tuple[Tuple[Type[Warning], str], ...] = (
    (UserWarning, r'mmseg\.models\.builder'),
    (UserWarning, r'mmpose\.datasets\.datasets\.utils'),
    (UserWarning, r'mmengine\.utils\.package_utils'),
    (DeprecationWarning, r'pkg_resources'),
)

#: Whether the calling code asked to see them (:func:`upstream_warnings_shown`).
_SHOWN: contextvars.ContextVar = contextvars.ContextVar(
    'sapiens_mm_upstream_warnings_shown', default=False)


@contextlib.contextmanager
def quiet_upstream_warnings() -> Iterator[None]:
    """Within: :data:`UPSTREAM_WARNINGS` hidden, unless inside
    :func:`upstream_warnings_shown`; the warning filters are restored on
    exit."""
    with warnings.catch_warnings():
        if not _SHOWN.get():
            for category, module in UPSTREAM_WARNINGS:
                warnings.filterwarnings('ignore', category=category,
                                        module=module)
        yield


@contextlib.contextmanager
def upstream_warnings_shown(shown: bool = True) -> Iterator[None]:
    """Within: :func:`quiet_upstream_warnings` hides nothing (when
    ``shown``), e.g. for a command line's ``--verbose``."""
    token = _SHOWN.set(bool(shown))
    try:
        yield
    finally:
        _SHOWN.reset(token)
