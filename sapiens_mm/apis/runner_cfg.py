"""Deprecated location: this module moved to :mod:`sapiens_mm.engine.runner_cfg`.

Importing it from here still works for one release, with a
``DeprecationWarning``.
"""
import warnings

from sapiens_mm.engine.runner_cfg import *  # noqa: F401,F403
from sapiens_mm.engine.runner_cfg import __all__  # noqa: F401

warnings.warn(
    'sapiens_mm.apis.runner_cfg moved to sapiens_mm.engine.runner_cfg; import it from there '
    '(the old path goes away in the next release).',
    DeprecationWarning,
    stacklevel=2)
