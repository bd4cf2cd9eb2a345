"""Colour maps of dense predictions (BGR uint8).

* :func:`colorize_depth`: inferno colour map of the relative depth (near is
  bright), background black.
* :func:`colorize_normal`: surface normals as RGB, ``(n + 1) / 2 * 255``.
* :func:`colorize_albedo`: Sapiens2 albedo (RGB in [0, 1]) as an image.
"""
from typing import Optional

import cv2
import numpy as np

__all__ = ['colorize_depth', 'colorize_normal', 'colorize_albedo']


def _valid(values: np.ndarray, mask: Optional[np.ndarray]) -> np.ndarray:
    valid = np.isfinite(values)
    if valid.ndim == 3:
        valid = valid.all(axis=-1)
    if mask is not None:
        valid &= np.asarray(mask, bool)
    return valid


def colorize_depth(depth: np.ndarray,
                   mask: Optional[np.ndarray] = None) -> np.ndarray:
    """Inferno colour map of a relative depth map (near = bright).

    The depth is min-max normalised over the valid pixels (finite and inside
    ``mask``), inverted so that near is bright, and colour-mapped; other
    pixels are black.

    Args:
        depth: (H, W) depth (larger = farther).
        mask: (H, W) foreground, or None for all finite pixels.

    Returns:
        (H, W, 3) uint8 BGR.
    """
    depth = np.asarray(depth, np.float32)
    valid = _valid(depth, mask)
    out = np.zeros(depth.shape + (3, ), np.uint8)
    if not valid.any():
        return out
    d = depth[valid]
    lo, hi = float(d.min()), float(d.max())
    norm = (d - lo) / (hi - lo) if hi > lo else np.zeros_like(d)
    gray = np.round((1.0 - norm) * 255).astype(np.uint8)
    colored = cv2.applyColorMap(gray.reshape(-1, 1), cv2.COLORMAP_INFERNO)
    out[valid] = colored.reshape(-1, 3)
    return out


def colorize_normal(normal: np.ndarray,
                    mask: Optional[np.ndarray] = None) -> np.ndarray:
    """Surface normals as colours: RGB = ``(n + 1) / 2 * 255``.

    Args:
        normal: (H, W, 3) unit normals (x, y, z).
        mask: (H, W) foreground, or None for all finite pixels.

    Returns:
        (H, W, 3) uint8 BGR; invalid pixels black.
    """
    normal = np.asarray(normal, np.float32)
    valid = _valid(normal, mask)
    rgb = np.clip((np.nan_to_num(normal) + 1.0) * 0.5 * 255.0, 0, 255)
    out = np.round(rgb).astype(np.uint8)[..., ::-1].copy()
    out[~valid] = 0
    return out


def colorize_albedo(albedo: np.ndarray,
                    mask: Optional[np.ndarray] = None) -> np.ndarray:
    """Albedo as an image: RGB ``clip(a, 0, 1) * 255``.

    Args:
        albedo: (H, W, 3) RGB albedo in [0, 1].
        mask: (H, W) foreground, or None for all finite pixels.

    Returns:
        (H, W, 3) uint8 BGR; invalid pixels black.
    """
    albedo = np.asarray(albedo, np.float32)
    valid = _valid(albedo, mask)
    rgb = np.clip(np.nan_to_num(albedo), 0.0, 1.0) * 255.0
    out = np.round(rgb).astype(np.uint8)[..., ::-1].copy()
    out[~valid] = 0
    return out
