"""The One-Euro filter: an adaptive low-pass filter for noisy live signals.

Casiez, Roussel and Vogel, "1 Euro Filter: A Simple Speed-based Low-pass
Filter for Noisy Input in Interactive Systems", CHI 2012. Written after the
paper's reference implementation (the speed is taken from the previous raw
sample), vectorised over arrays of any shape, e.g. one person's (K, 2)
keypoints.
"""
import math
from typing import Optional, Union

import numpy as np

__all__ = ['OneEuroFilter']


def _alpha(cutoff: Union[float, np.ndarray], dt: float):
    """Smoothing factor of a first-order low-pass at ``cutoff`` Hz sampled
    every ``dt`` seconds: ``1 / (1 + tau / dt)``, ``tau = 1 / (2 pi fc)``."""
    tau = 1.0 / (2 * math.pi * cutoff)
    return 1.0 / (1.0 + tau / dt)


class OneEuroFilter:
    """One-Euro filter of an array-valued signal.

    Each element is low-passed with a cutoff that rises with its speed:
    ``fc = min_cutoff + beta * |speed| / scale``, so that slow motion (where
    jitter shows) is smoothed strongly and fast motion lags little. The
    speed is itself low-passed at ``d_cutoff``.

    Args:
        min_cutoff: Cutoff in Hz at rest; lower smooths more. Defaults to
            4.0.
        beta: Speed coefficient; higher lags less in fast motion. Defaults
            to 4.0, for a speed in ``scale`` units per second.
        d_cutoff: Cutoff in Hz of the speed estimate. Defaults to 1.0.

    The defaults (tests/tracking/test_tracking.py): for a 200 px tall person at
    30 fps with 2 px keypoint noise they cut the frame-to-frame acceleration
    RMS to about 0.4 of the raw signal's, and follow a step of a tenth of
    the person's height to within 10 % in 2 frames.

    Raises:
        ValueError: A non-positive cutoff or a negative beta.
    """

    def __init__(self,
                 min_cutoff: float = 4.0,
                 beta: float = 4.0,
                 d_cutoff: float = 1.0) -> None:
        if not (min_cutoff > 0 and d_cutoff > 0 and beta >= 0):
            raise ValueError(
                'One-Euro filter needs min_cutoff > 0 and d_cutoff > 0 (Hz) '
                f'and beta >= 0, got min_cutoff={min_cutoff!r}, '
                f'beta={beta!r}, d_cutoff={d_cutoff!r}.')
        self.min_cutoff = float(min_cutoff)
        self.beta = float(beta)
        self.d_cutoff = float(d_cutoff)
        self.reset()

    def reset(self) -> None:
        """Forget the signal (the next sample passes unfiltered)."""
        self._x_raw: Optional[np.ndarray] = None
        self._x: Optional[np.ndarray] = None
        self._dx: Optional[np.ndarray] = None
        self._t: Optional[float] = None

    def __call__(self, x: np.ndarray, t: float,
                 scale: float = 1.0) -> np.ndarray:
        """Filter one sample.

        Args:
            x: The sample, an array of a fixed shape (e.g. (K, 2) pixels).
            t: Its time in seconds (increasing; video: frame index / fps).
            scale: Unit of the speed in the cutoff adaptation, e.g. the
                person's height in pixels, so that ``beta`` does not depend
                on image resolution. Defaults to 1.

        Returns:
            The filtered sample, float64, of ``x``'s shape.

        Raises:
            ValueError: ``x`` changed shape or ``t`` did not increase.
        """
        x = np.asarray(x, np.float64)
        if self._x is None:
            self._x_raw, self._x = x.copy(), x.copy()
            self._dx, self._t = np.zeros_like(x), float(t)
            return x.copy()
        if x.shape != self._x.shape:
            raise ValueError(f'One-Euro filter got a {x.shape} sample after '
                             f'{self._x.shape} ones; use one filter per '
                             'signal.')
        dt = float(t) - self._t
        if not dt > 0:
            raise ValueError(f'One-Euro filter needs increasing times, got '
                             f'{t} after {self._t}.')
        a_d = _alpha(self.d_cutoff, dt)
        self._dx = a_d * (x - self._x_raw) / dt + (1 - a_d) * self._dx
        cutoff = self.min_cutoff + self.beta * np.abs(self._dx) / float(scale)
        a = _alpha(cutoff, dt)
        self._x = a * x + (1 - a) * self._x
        self._x_raw, self._t = x.copy(), float(t)
        return self._x.copy()
