"""Colour conversion shared by the drawing functions."""
from typing import Tuple

import cv2
import numpy as np

__all__ = ['rgb_to_bgr', 'track_color']


def rgb_to_bgr(color) -> Tuple[int, int, int]:
    """An RGB colour (metainfo / palette convention) as an OpenCV BGR int
    triple; extra components (alpha) are dropped."""
    c = [int(v) for v in np.asarray(color).reshape(-1)[:3]]
    return c[2], c[1], c[0]


def track_color(track_id: int) -> Tuple[int, int, int]:
    """A BGR colour of its own for each track ID: hues a golden angle apart
    (neighbouring IDs far apart on the colour wheel), full saturation and
    value; ID -1 (untracked) is grey."""
    if track_id < 0:
        return 128, 128, 128
    hue = (int(track_id) * 0.618033988749895) % 1.0
    hsv = np.array([[[hue * 180, 255, 255]]], np.uint8)
    b, g, r = cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)[0, 0]
    return int(b), int(g), int(r)
