"""Whether OpenCV can open windows here (``show`` / ``--show``), checked
before anything is shown: OpenCV's Qt / GTK back ends abort the whole
process (no exception to catch) when they cannot reach a display.

Standard library first (the display variables), OpenCV only when they are
set, so that a command line can refuse ``--show`` before torch loads."""
import os
import re
import sys
from typing import Optional

__all__ = ['display_problem']


def display_problem() -> Optional[str]:
    """Why OpenCV cannot open windows here, or None when it can.

    Returns:
        ``'no display (DISPLAY and WAYLAND_DISPLAY are not set)'`` on a
        Linux / BSD machine without one, ``'OpenCV was built without GUI
        support (...)'`` for a headless OpenCV, else None.
    """
    if sys.platform.startswith(('linux', 'freebsd', 'openbsd')) and not (
            os.environ.get('DISPLAY') or os.environ.get('WAYLAND_DISPLAY')):
        return 'no display (DISPLAY and WAYLAND_DISPLAY are not set)'
    import cv2
    info = cv2.getBuildInformation()
    gui = re.search(r'^\s*GUI:\s*(\S+)', info, re.MULTILINE)
    if gui is not None and gui.group(1).upper() == 'NONE':
        return ('OpenCV was built without GUI support (e.g. '
                'opencv-python-headless)')
    return None
