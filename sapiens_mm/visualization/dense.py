"""Colour maps of dense predictions (BGR uint8).

* :func:`colorize_depth`: inferno colour map of the relative depth (near is
  bright), background black.
* :func:`colorize_normal`: surface normals as RGB, ``(n + 1) / 2 * 255``.
* :func:`colorize_albedo`: Sapiens2 albedo (RGB in [0, 1]) as an image.
* :func:`draw_depth` / :func:`draw_normal`: the colour maps with their key
  on the right (a depth colour bar with the near and far values, a normal
  orientation sphere).
"""
from typing import Optional

import cv2
import numpy as np

from .legend import DEPTH_COLORMAP, depth_colorbar, normal_key

__all__ = ['colorize_depth', 'colorize_normal', 'colorize_albedo',
           'draw_depth', 'draw_normal']


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
    colored = cv2.applyColorMap(gray.reshape(-1, 1), DEPTH_COLORMAP)
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


def draw_depth(depth: np.ndarray,
               mask: Optional[np.ndarray] = None,
               metric: bool = False) -> np.ndarray:
    """:func:`colorize_depth` with its colour bar on the right: near (bright)
    at the top, far at the bottom, each with its depth.

    Args:
        depth: (H, W) depth (larger = farther).
        mask: (H, W) foreground, or None for all finite pixels.
        metric: The depth is in metres (e.g. the Z of a Sapiens2 pointmap);
            else relative (Sapiens depth models), labelled so.

    Returns:
        (H, W + bar width, 3) uint8 BGR.
    """
    depth = np.asarray(depth, np.float32)
    valid = _valid(depth, mask)
    near = far = None
    if valid.any():
        near, far = float(depth[valid].min()), float(depth[valid].max())
    bar = depth_colorbar(depth.shape[0], near, far, metric, depth.shape[1])
    return np.concatenate([colorize_depth(depth, mask), bar], axis=1)


def draw_normal(normal: np.ndarray,
                mask: Optional[np.ndarray] = None) -> np.ndarray:
    """:func:`colorize_normal` with its orientation key on the right (see
    :func:`~sapiens_mm.visualization.legend.normal_key`).

    Args:
        normal: (H, W, 3) unit normals (x, y, z).
        mask: (H, W) foreground, or None for all finite pixels.

    Returns:
        (H, W + key width, 3) uint8 BGR.
    """
    vis = colorize_normal(normal, mask)
    key = normal_key(vis.shape[0], colorize_normal, vis.shape[1])
    return np.concatenate([vis, key], axis=1)
