from .cli import (THIRD_PARTY_WARNINGS, add_debug_argument,
                  hide_third_party_warnings, one_line, run_cli,
                  third_party_warnings)
from .version_check import SUPPORTED_VERSIONS, check_versions

__all__ = [
    'SUPPORTED_VERSIONS', 'check_versions', 'add_debug_argument', 'one_line',
    'run_cli', 'THIRD_PARTY_WARNINGS', 'hide_third_party_warnings',
    'third_party_warnings'
]
