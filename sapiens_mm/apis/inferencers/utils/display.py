"""Showing visualisations in OpenCV windows (``show`` / ``--show``)."""
import os
import re
import sys
from typing import Mapping, Optional

import cv2
import numpy as np

__all__ = ['StopRequested', 'show_images', 'display_problem']


def display_problem() -> Optional[str]:
    """Why OpenCV cannot open windows here, or None when it can.

    Checked before anything is shown: OpenCV's Qt / GTK back ends abort the
    whole process (no exception to catch) when they cannot reach a display.

    Returns:
        ``'OpenCV was built without GUI support (...)'`` for a headless
        OpenCV, ``'no display (DISPLAY and WAYLAND_DISPLAY are not set)'``
        on a Linux / BSD machine without one, else None.
    """
    info = cv2.getBuildInformation()
    gui = re.search(r'^\s*GUI:\s*(\S+)', info, re.MULTILINE)
    if gui is not None and gui.group(1).upper() == 'NONE':
        return ('OpenCV was built without GUI support (e.g. '
                'opencv-python-headless)')
    if sys.platform.startswith(('linux', 'freebsd', 'openbsd')) and not (
            os.environ.get('DISPLAY') or os.environ.get('WAYLAND_DISPLAY')):
        return 'no display (DISPLAY and WAYLAND_DISPLAY are not set)'
    return None


class StopRequested(Exception):
    """The user closed the live view (``q`` or Esc)."""


def show_images(images: Mapping[str, np.ndarray], wait_time: int) -> None:
    """Show each BGR image in the window ``'Sapiens <key>'`` and wait for a
    key.

    Args:
        images: ``{task: (H, W, 3) uint8 BGR image}``.
        wait_time: ``cv2.waitKey`` time in ms (0: until a key is pressed).

    Raises:
        StopRequested: ``q`` or Esc was pressed.
        RuntimeError: No window can be opened (no display, or OpenCV built
            without GUI support).
    """
    try:
        for task, img in images.items():
            cv2.imshow(f'Sapiens {task}', img)
        key = cv2.waitKey(int(wait_time)) & 0xFF
    except cv2.error as e:
        raise RuntimeError(
            f'Cannot open a window to show results ({e}); run without '
            'show / --show and use out_dir instead.') from None
    if key in (ord('q'), 27):
        raise StopRequested
