"""Check that the installed OpenMMLab stack is one sapiens_mm supports."""
from importlib import metadata
from typing import Dict, Tuple

from packaging.version import Version

# distribution name -> (import name, lowest accepted, first rejected)
SUPPORTED_VERSIONS: Dict[str, Tuple[str, str, str]] = {
    'torch': ('torch', '2.6.0', '3.0.0'),
    'mmengine': ('mmengine', '0.10.4', '0.11.0'),
    'mmcv': ('mmcv', '2.1.0', '2.2.0'),
    'mmpretrain': ('mmpretrain', '1.2.0', '1.3.0'),
    'mmpose': ('mmpose', '1.3.2', '1.4.0'),
    'mmsegmentation': ('mmseg', '1.2.2', '1.3.0'),
}

#: What to do: this Python is not the project's environment (or the
#: environment is not built yet).
_INSTALL_HINT = ('Run it with the project\'s environment: `.venv/bin/python '
                 '...` from the sapiens_mm repository, or `source '
                 '.venv/bin/activate` first (`bash tools/setup_env.sh` '
                 'creates .venv if it is missing).')


def check_versions(supported: Dict[str, Tuple[str, str, str]] = None) -> None:
    """Raise ``ImportError`` if a required package is missing or out of range.

    Args:
        supported: mapping ``dist name -> (import name, min, max_exclusive)``.
            Defaults to :data:`SUPPORTED_VERSIONS`.

    Raises:
        ImportError: naming the package, the installed version and the
            accepted range.
    """
    supported = SUPPORTED_VERSIONS if supported is None else supported
    problems = []
    for dist, (import_name, low, high) in supported.items():
        try:
            installed = metadata.version(dist)
        except metadata.PackageNotFoundError:
            problems.append(f'{dist} (import {import_name}) is not installed; '
                            f'sapiens_mm needs {dist}>={low},<{high}')
            continue
        base = Version(Version(installed).base_version)
        if not Version(low) <= base < Version(high):
            problems.append(f'{dist} {installed} is installed, but sapiens_mm '
                            f'needs {dist}>={low},<{high}')
    if problems:
        raise ImportError('sapiens_mm cannot start: ' + '; '.join(problems) +
                          '. ' + _INSTALL_HINT)

