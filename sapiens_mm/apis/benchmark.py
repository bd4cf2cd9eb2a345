"""Deprecated home of the benchmark: use :mod:`sapiens_mm.analysis`.

Importing this module warns (``DeprecationWarning``) and gives the names it
had; it goes away in the next release.
"""
import warnings

from sapiens_mm.analysis import *  # noqa: F401,F403
from sapiens_mm.analysis import BENCHMARK_DTYPES, __all__ as _analysis_all
from sapiens_mm.apis.inference import DTYPES as _ALL_DTYPES

#: The dtypes the benchmark times (``sapiens_mm.analysis.BENCHMARK_DTYPES``).
DTYPES = {name: _ALL_DTYPES[name] for name in BENCHMARK_DTYPES}

__all__ = ['DTYPES'] + list(_analysis_all)

warnings.warn(
    'sapiens_mm.apis.benchmark moved to sapiens_mm.analysis; import from '
    'there (this module goes away in the next release).',
    DeprecationWarning, stacklevel=2)
