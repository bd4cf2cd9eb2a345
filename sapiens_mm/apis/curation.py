"""Deprecated location: this module moved to :mod:`sapiens_mm.datasets.curation`.

Importing it from here still works for one release, with a
``DeprecationWarning``.
"""
import warnings

from sapiens_mm.datasets.curation import *  # noqa: F401,F403
from sapiens_mm.datasets.curation import __all__  # noqa: F401

warnings.warn(
    'sapiens_mm.apis.curation moved to sapiens_mm.datasets.curation; import it from there '
    '(the old path goes away in the next release).',
    DeprecationWarning,
    stacklevel=2)
