from .cli import add_debug_argument, one_line, run_cli
from .version_check import SUPPORTED_VERSIONS, check_versions

__all__ = [
    'SUPPORTED_VERSIONS', 'check_versions', 'add_debug_argument', 'one_line',
    'run_cli'
]
