"""The package's command lines: ``python -m sapiens_mm`` / ``tools/infer.py``
(:mod:`~sapiens_mm.cli.infer`), ``tools/deploy/export.py``
(:mod:`~sapiens_mm.cli.deploy`), and the error handling every command line
shares (:mod:`~sapiens_mm.cli.common`).

Importing this package imports only :mod:`~sapiens_mm.cli.common`; each
command's module loads the models and libraries it needs when it runs.
"""
from .common import (INTERRUPTED_EXIT_CODE, THIRD_PARTY_WARNINGS,
                     add_debug_argument, hide_third_party_warnings, one_line,
                     run_cli, third_party_warnings)

__all__ = [
    'add_debug_argument', 'one_line', 'run_cli', 'THIRD_PARTY_WARNINGS',
    'hide_third_party_warnings', 'third_party_warnings',
    'INTERRUPTED_EXIT_CODE'
]
