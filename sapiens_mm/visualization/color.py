"""Colour conversion shared by the drawing functions."""
from typing import Tuple

import numpy as np

__all__ = ['rgb_to_bgr']


def rgb_to_bgr(color) -> Tuple[int, int, int]:
    """An RGB colour (metainfo / palette convention) as an OpenCV BGR int
    triple; extra components (alpha) are dropped."""
    c = [int(v) for v in np.asarray(color).reshape(-1)[:3]]
    return c[2], c[1], c[0]
