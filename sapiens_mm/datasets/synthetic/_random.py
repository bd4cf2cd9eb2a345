"""Cheap scalar random numbers drawn in blocks from a numpy Generator.

Building a figure needs a few hundred scalar draws; calling the numpy
Generator for each costs microseconds apiece, so :class:`FastRandom` draws
uniforms in blocks and derives the other distributions in pure Python.  It
is deterministic given the Generator's state.
"""
from __future__ import annotations

import bisect
import math
from typing import Optional, Sequence, Union

import numpy as np


class Cumulative(tuple):
    """Cumulative weights, accepted by :meth:`FastRandom.choice` as ``p``."""

    @classmethod
    def of(cls, weights: Sequence[float]) -> 'Cumulative':
        """Build from (unnormalised) weights."""
        return cls(np.cumsum(weights).tolist())


def _is_cumulative(p) -> bool:
    return isinstance(p, Cumulative)


class FastRandom:
    """Subset of :class:`numpy.random.Generator`'s API for scalar draws.

    Args:
        rng: Source generator (uniform blocks are drawn from it).
        block: Number of uniforms drawn at a time.
    """

    def __init__(self, rng: np.random.Generator, block: int = 256):
        self._rng = rng
        self._block = block
        self._buf: list = []
        self._i = 0

    def random(self, size: Optional[int] = None):
        """Uniform in [0, 1) (a list of floats when ``size`` is given)."""
        if size is not None:
            return self._rng.random(size)
        if self._i >= len(self._buf):
            self._buf = self._rng.random(self._block).tolist()
            self._i = 0
        self._i += 1
        return self._buf[self._i - 1]

    def uniform(self, low: float = 0.0, high: float = 1.0,
                size: Optional[int] = None):
        """Uniform in [low, high)."""
        if size is not None:
            return self._rng.uniform(low, high, size)
        return low + (high - low) * self.random()

    def standard_normal(self, size: Optional[int] = None):
        """Standard normal draw(s) (Box-Muller)."""
        if size is not None:
            return self._rng.standard_normal(size)
        u1 = 1.0 - self.random()
        return math.sqrt(-2.0 * math.log(u1)) * \
            math.cos(2.0 * math.pi * self.random())

    def normal(self, loc: float = 0.0, scale: float = 1.0) -> float:
        """Normal draw."""
        return loc + scale * self.standard_normal()

    def integers(self, n: int) -> int:
        """Integer in [0, n)."""
        return min(int(self.random() * n), n - 1)

    def choice(self, a: Union[int, Sequence], p: Optional[Sequence] = None):
        """One element of ``a`` (or of ``range(a)``), optionally weighted.

        ``p`` may be probabilities or a precomputed :class:`Cumulative`.
        """
        n = a if isinstance(a, int) else len(a)
        if p is None:
            k = self.integers(n)
        else:
            cum = list(p) if _is_cumulative(p) else np.cumsum(p).tolist()
            k = min(bisect.bisect_right(cum, self.random() * cum[-1]), n - 1)
        return k if isinstance(a, int) else a[k]
