"""Temporal stabilisation of per-frame depth, surface normal and pointmap
maps.

A depth model run frame by frame on a video flickers: relative depth comes
with a per-frame scale and shift of its own, and both outputs carry
per-frame noise. :class:`DepthStabilizer` maps each depth frame onto the
previous aligned frame by a least-squares scale and shift over the pixels
that are foreground in both, then low-passes it; :class:`NormalStabilizer`
low-passes the normals and makes them unit vectors again. Both are
exponential moving averages per pixel (weight ``alpha`` on the new frame):
on a static scene the noise variance falls to ``alpha / (2 - alpha)`` of a
frame's.

A Sapiens2 pointmap is the canonical pointmap divided by a scale the model
predicts per frame, so a video's pointmaps grow and shrink as that scale
jitters. :class:`PointmapScaleStabilizer` measures each frame's scale (the
median depth of the person), smooths its logarithm with a One-Euro filter
(steady when the scale only jitters, quick when it really changes) and
rescales the frame to the smoothed scale.
"""
from typing import Optional, Tuple

import numpy as np

from .one_euro_filter import OneEuroFilter

__all__ = ['DepthStabilizer', 'NormalStabilizer', 'PointmapScaleStabilizer',
           'fit_scale_shift_symmetric']


def _check_alpha(alpha: float) -> float:
    if not 0 < alpha <= 1:
        raise ValueError(f'alpha (weight of the new frame) must be in (0, 1],'
                         f' got {alpha!r}.')
    return float(alpha)


def fit_scale_shift_symmetric(x: np.ndarray,
                              y: np.ndarray) -> Tuple[float, float]:
    """``(scale, shift)`` of the line ``y = scale * x + shift`` through two
    equally noisy samples: the geometric mean of the least-squares slopes
    of y on x and of x on y (the reduced major axis), ``scale = sign(cov) *
    std(y) / std(x)``.

    Least squares of y on x alone shrinks the scale by ``var / (var +
    noise)`` (regression dilution); chained over a video's frames that bias
    would fade (or, fitted the other way, swell) the depth contrast frame
    after frame. With the same relative noise in x and y this fit has no
    such bias.

    Args:
        x, y: (M,) values at the same pixels.

    Returns:
        ``(scale, shift)``; scale 0 when either is constant.
    """
    x = np.asarray(x, np.float64)
    y = np.asarray(y, np.float64)
    mx, my = x.mean(), y.mean()
    sx, sy = x.std(), y.std()
    cov = ((x - mx) * (y - my)).mean()
    if sx <= 1e-12 or sy <= 1e-12:
        return 0.0, float(my)
    scale = float(np.sign(cov) * sy / sx)
    return scale, float(my - scale * mx)


class DepthStabilizer:
    """Depth frames aligned frame to frame, then averaged.

    Each frame is mapped by a least-squares scale and shift
    (:func:`fit_scale_shift_symmetric`) onto the previous aligned frame over
    the pixels that are foreground in both, so that all frames share the
    first frame's scale and shift; the output is the running average of the
    aligned frames. A frame sharing fewer than ``min_pixels`` foreground
    pixels with the previous one, or whose fitted scale is not positive (a
    scene cut), starts afresh.

    Args:
        alpha: Weight of the new (aligned) frame, in (0, 1]; 1 aligns
            without averaging. Defaults to 0.5.
        min_pixels: Fewest common foreground pixels for an alignment.
            Defaults to 100.

    Raises:
        ValueError: ``alpha`` out of range.
    """

    def __init__(self, alpha: float = 0.5, min_pixels: int = 100) -> None:
        self.alpha = _check_alpha(alpha)
        self.min_pixels = int(min_pixels)
        self.reset()

    def reset(self) -> None:
        """Forget the previous frames (e.g. at the start of a video)."""
        self.aligned: Optional[np.ndarray] = None
        self.output: Optional[np.ndarray] = None

    def __call__(self, depth: np.ndarray,
                 foreground: Optional[np.ndarray] = None) -> np.ndarray:
        """Stabilise one frame.

        Args:
            depth: (H, W) relative depth; NaN where there is none (e.g. the
                background the segmentation masked out).
            foreground: (H, W) bool mask of the pixels to use, or None (the
                finite pixels).

        Returns:
            (H, W) float32 stabilised depth, NaN where ``depth`` is NaN or
            outside ``foreground``.
        """
        depth = np.asarray(depth, np.float64)
        valid = np.isfinite(depth)
        if foreground is not None:
            valid &= np.asarray(foreground, bool)
        depth = np.where(valid, depth, np.nan)
        prev = self.aligned
        if prev is None or prev.shape != depth.shape:
            return self._restart(depth)
        common = valid & np.isfinite(prev)
        if common.sum() < self.min_pixels:
            return self._restart(depth)
        scale, shift = fit_scale_shift_symmetric(depth[common], prev[common])
        if not scale > 0:
            return self._restart(depth)
        self.aligned = scale * depth + shift
        both = common & np.isfinite(self.output)
        self.output = np.where(
            both, self.alpha * self.aligned + (1 - self.alpha) * self.output,
            self.aligned)
        return self.output.astype(np.float32)

    def _restart(self, depth: np.ndarray) -> np.ndarray:
        self.aligned = self.output = depth
        return depth.astype(np.float32)


class NormalStabilizer:
    """Normal frames averaged per pixel, then renormalised.

    Args:
        alpha: Weight of the new frame, in (0, 1]. Defaults to 0.5.

    Raises:
        ValueError: ``alpha`` out of range.
    """

    def __init__(self, alpha: float = 0.5) -> None:
        self.alpha = _check_alpha(alpha)
        self.reset()

    def reset(self) -> None:
        """Forget the previous frames."""
        self.previous: Optional[np.ndarray] = None

    def __call__(self, normal: np.ndarray) -> np.ndarray:
        """Stabilise one frame.

        Args:
            normal: (H, W, 3) unit normals; NaN where there are none.

        Returns:
            (H, W, 3) float32 unit normals (NaN where ``normal`` is NaN);
            where the average cancels out (opposite normals) the new frame's
            normal.
        """
        normal = np.asarray(normal, np.float64)
        prev = self.previous
        if prev is None or prev.shape != normal.shape:
            out = normal
        else:
            both = (np.isfinite(normal).all(-1) &
                    np.isfinite(prev).all(-1))[..., None]
            mixed = self.alpha * normal + (1 - self.alpha) * prev
            norm = np.linalg.norm(np.where(both, mixed, 0.), axis=-1,
                                  keepdims=True)
            ok = both & (norm > 1e-6)
            out = np.where(ok, mixed / np.where(ok, norm, 1.), normal)
        self.previous = out
        return out.astype(np.float32)


class PointmapScaleStabilizer:
    """A video's metric pointmaps brought to a temporally smooth scale.

    Each frame's scale is the median Z of its finite points with positive
    depth (the person; the background is NaN when seg or matting masks it).
    Its logarithm is smoothed with a :class:`~.one_euro_filter.\
OneEuroFilter` over the frame times, and the frame is multiplied by
    ``smoothed / measured``: a jitter of the predicted scale (which
    multiplies every point of a frame alike) is averaged away, a real change
    (the person walking towards the camera, a new shot) moves the log-scale
    fast, raises the filter's cutoff and is followed within a few frames.

    Args:
        min_cutoff: Cutoff (Hz) of the log-scale at rest; lower smooths
            more. Defaults to 0.5.
        beta: Speed coefficient (per unit of log-scale per second); higher
            follows real changes sooner. Defaults to 5.0.
        d_cutoff: Cutoff (Hz) of the speed estimate. Defaults to 1.0.

    Attributes:
        measured: The last frame's measured scale (median Z), or None.
        smoothed: The scale it was brought to, or None.
    """

    def __init__(self, min_cutoff: float = 0.5, beta: float = 5.0,
                 d_cutoff: float = 1.0) -> None:
        self.filter = OneEuroFilter(min_cutoff, beta, d_cutoff)
        self.reset()

    def reset(self) -> None:
        """Forget the previous frames (a new video or a scene cut)."""
        self.filter.reset()
        self.measured: Optional[float] = None
        self.smoothed: Optional[float] = None

    def __call__(self, pointmap: np.ndarray, t: float) -> np.ndarray:
        """Stabilise one frame.

        Args:
            pointmap: (H, W, 3) metric camera-frame XYZ, NaN where none.
            t: The frame's time in seconds (increasing).

        Returns:
            (H, W, 3) float32: ``pointmap * smoothed / measured``; the frame
            unchanged when it has no point with positive depth.
        """
        pointmap = np.asarray(pointmap, np.float32)
        z = pointmap[..., 2]
        z = z[np.isfinite(z) & (z > 0)]
        if not z.size:
            self.measured = self.smoothed = None
            return pointmap
        self.measured = float(np.median(z))
        log_scale = float(self.filter(np.array(np.log(self.measured)), t))
        self.smoothed = float(np.exp(log_scale))
        return pointmap * np.float32(self.smoothed / self.measured)
