"""Showing visualisations in OpenCV windows (``show`` / ``--show``); whether
they can open: :func:`sapiens_mm.utils.display.display_problem`."""
from typing import Mapping

import cv2
import numpy as np

from sapiens_mm.utils.display import display_problem

__all__ = ['StopRequested', 'show_images', 'display_problem']


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
