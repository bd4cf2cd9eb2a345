"""Deprecated location: the benchmark moved to :mod:`sapiens_mm.analysis`.

Importing it from here still works for one release, with a
``DeprecationWarning``; the names resolve to :mod:`sapiens_mm.analysis`'s on
first use (the analysis package sits above ``apis`` and is not imported at
module level here).
"""
import importlib
import warnings

warnings.warn(
    'sapiens_mm.apis.benchmark moved to sapiens_mm.analysis; import it from '
    'there (the old path goes away in the next release).',
    DeprecationWarning,
    stacklevel=2)


def __getattr__(name: str):
    analysis = importlib.import_module('sapiens_mm.analysis')
    if name == 'DTYPES':  # the dtypes the benchmark times, by name
        from sapiens_mm.tasks import DTYPES
        return {n: DTYPES[n] for n in analysis.BENCHMARK_DTYPES}
    try:
        return getattr(analysis, name)
    except AttributeError:
        raise AttributeError(f'module {__name__!r} has no attribute '
                             f'{name!r}') from None
