"""Relative depth to metres: a least-squares scale and shift fitted on points
of known depth.

Sapiens depth models predict relative depth: the metric depth up to an
unknown scale and shift. With a few pixels of known depth (a tape measure, a
LiDAR / depth sensor's sparse map, a calibration target) the map is made
metric by ``metres = scale * relative + shift``; for models that predict
inverse depth (disparity-like, larger = nearer) the fit is done on the inverse:
``1 / metres = scale * relative + shift`` (weighted so that it minimises
the error in metres).

* :func:`fit_scale_shift`: the fit, its residuals, and refusal (with the
  reason) when the known points cannot determine it.
* :func:`apply_scale_shift`: the metric depth map of a fit.
* :func:`known_points_from_csv` / :func:`known_points_from_sparse_depth`:
  the known points from a CSV of ``x, y, metres`` rows or from a sparse depth
  image.
"""
import csv
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Tuple, Union

import numpy as np

__all__ = [
    'MetricDepthFit', 'fit_scale_shift', 'apply_scale_shift',
    'known_points_from_csv', 'known_points_from_sparse_depth'
]

#: Fewest known points a fit accepts: two determine scale and shift exactly,
#: a third is needed for the residual to say anything.
MIN_POINTS = 3


@dataclass(frozen=True)
class MetricDepthFit:
    """A fitted mapping from relative to metric depth.

    Attributes:
        scale: ``s`` of ``metres = s * relative + t`` (or of ``1 / metres``
            for an inverse-depth fit).
        shift: ``t``.
        inverse: Whether the relative map is inverse depth.
        num_points: Known points the fit used.
        rmse_m: Root-mean-square residual at the known points, in metres.
        max_abs_m: Largest absolute residual at the known points, in metres.
        rel_rmse: RMS of the residuals relative to the known depths.
    """
    scale: float
    shift: float
    inverse: bool
    num_points: int
    rmse_m: float
    max_abs_m: float
    rel_rmse: float

    def to_dict(self) -> dict:
        return asdict(self)


def fit_scale_shift(relative: np.ndarray,
                    metres: np.ndarray,
                    inverse: bool = False,
                    min_points: int = MIN_POINTS) -> MetricDepthFit:
    """Least-squares ``scale`` and ``shift`` mapping relative depth at known
    points to their depth in metres.

    Args:
        relative: (N,) relative depth (or inverse depth) at the known points;
            NaN entries (e.g. outside the person mask) are ignored.
        metres: (N,) known depth in metres (> 0) at the same points; NaN or
            non-positive entries are ignored.
        inverse: ``relative`` is inverse depth: fit ``1 / metres``.
        min_points: Fewest usable points accepted (at least 2).

    Returns:
        The fit, with its residuals at the known points in metres.

    Raises:
        ValueError: Too few usable points, a relative depth that is constant
            over them (the scale is then undetermined), or a fit whose scale
            is not positive (depth would decrease where the relative map
            increases: usually inverse depth fitted as depth or vice versa).
    """
    rel = np.asarray(relative, np.float64).reshape(-1)
    met = np.asarray(metres, np.float64).reshape(-1)
    if rel.shape != met.shape:
        raise ValueError(f'{rel.size} relative values but {met.size} known '
                         'depths: give one relative value per known point.')
    usable = np.isfinite(rel) & np.isfinite(met) & (met > 0)
    n = int(usable.sum())
    min_points = max(2, int(min_points))
    if n < min_points:
        dropped = rel.size - n
        raise ValueError(
            f'Cannot fit scale and shift: {n} usable known point(s), at '
            f'least {min_points} needed ({dropped} of {rel.size} dropped for '
            'a missing relative depth, e.g. outside the person mask, or a '
            'known depth that is not a positive number). Give more points.')
    x, d = rel[usable], met[usable]
    y = 1.0 / d if inverse else d
    spread = float(x.max() - x.min())
    if not spread > 1e-9 * max(1.0, float(np.abs(x).max())):
        raise ValueError(
            f'Cannot fit scale and shift: the relative depth is the same '
            f'({x[0]:.6g}) at all {n} known points, so the scale is '
            'undetermined. Give points at different depths.')
    A = np.stack([x, np.ones_like(x)], axis=1)
    if inverse:
        # An error e in 1 / d is an error of about e * d^2 in metres: rows
        # weighted by d^2 minimise (to first order) the error in metres, so
        # far points are not drowned by near ones.
        w = d**2
        A, y = A * w[:, None], y * w
    (scale, shift), *_ = np.linalg.lstsq(A, y, rcond=None)
    if not scale > 0:
        kind = 'inverse depth' if inverse else 'depth'
        other = '--inverse off' if inverse else '--inverse'
        raise ValueError(
            f'The fitted scale is {scale:.4g} (not positive): the known depths '
            f'decrease where the relative {kind} increases. Is the map the '
            f'other kind (try {other}), or are the points mismatched?')
    pred = _metric(x, scale, shift, inverse)
    resid = pred - d
    return MetricDepthFit(
        scale=float(scale), shift=float(shift), inverse=bool(inverse),
        num_points=n, rmse_m=float(np.sqrt(np.mean(resid**2))),
        max_abs_m=float(np.abs(resid).max()),
        rel_rmse=float(np.sqrt(np.mean((resid / d)**2))))


def _metric(x: np.ndarray, scale: float, shift: float,
            inverse: bool) -> np.ndarray:
    y = scale * x + shift
    if not inverse:
        return y
    with np.errstate(divide='ignore', invalid='ignore'):
        return np.where(y > 0, 1.0 / y, np.nan)


def apply_scale_shift(relative: np.ndarray, fit: MetricDepthFit) -> np.ndarray:
    """Metric depth of a relative (or inverse) depth map.

    Args:
        relative: (H, W) relative depth, NaN where invalid.
        fit: A :func:`fit_scale_shift` result.

    Returns:
        (H, W) float32 depth in metres; NaN where the relative depth is
        invalid or, for an inverse fit, maps to a non-positive inverse depth
        (beyond infinity).
    """
    return _metric(np.asarray(relative, np.float64), fit.scale, fit.shift,
                   fit.inverse).astype(np.float32)


def _sample(relative: np.ndarray, xs: np.ndarray,
            ys: np.ndarray) -> np.ndarray:
    """Relative depth at pixels (nearest pixel centre)."""
    h, w = relative.shape
    u = np.round(xs).astype(np.int64)
    v = np.round(ys).astype(np.int64)
    outside = (u < 0) | (u >= w) | (v < 0) | (v >= h)
    if outside.any():
        i = int(np.flatnonzero(outside)[0])
        raise ValueError(
            f'Known point {i + 1} at pixel ({xs[i]:g}, {ys[i]:g}) is outside '
            f'the {w}x{h} depth map: pixel coordinates are (x, y) with x in '
            f'[0, {w - 1}] and y in [0, {h - 1}].')
    return relative[v, u]


def known_points_from_csv(path: Union[str, Path], relative: np.ndarray
                          ) -> Tuple[np.ndarray, np.ndarray]:
    """Known points from a CSV file of ``x, y, metres`` rows.

    ``x, y`` are pixel coordinates of the depth map (pixel centres at
    integers; fractional values go to the nearest pixel). A first row that
    is not numeric is taken as a header; blank lines and lines starting with
    ``#`` are skipped.

    Args:
        path: CSV file.
        relative: (H, W) relative depth map the pixels index.

    Returns:
        ``(relative_at_points, metres)``, two (N,) float64 arrays.

    Raises:
        ValueError: A malformed row (the message gives its line) or a pixel
            outside the map.
    """
    rows = []
    with open(path, newline='', encoding='utf-8') as f:
        for line_no, row in enumerate(csv.reader(f), start=1):
            cells = [c.strip() for c in row]
            if not any(cells) or cells[0].startswith('#'):
                continue
            try:
                values = [float(c) for c in cells if c != '']
            except ValueError:
                if not rows and line_no == 1:
                    continue  # header
                raise ValueError(f'{path}, line {line_no}: expected numbers '
                                 f'x, y, metres, got {row!r}.') from None
            if len(values) != 3 or not all(map(math.isfinite, values)):
                raise ValueError(f'{path}, line {line_no}: expected three '
                                 f'finite numbers x, y, metres, got {row!r}.')
            rows.append(values)
    if not rows:
        raise ValueError(f'{path} has no x, y, metres rows.')
    pts = np.asarray(rows, np.float64)
    rel = np.asarray(relative, np.float64)
    return _sample(rel, pts[:, 0], pts[:, 1]), pts[:, 2]


def known_points_from_sparse_depth(sparse: np.ndarray, relative: np.ndarray
                                   ) -> Tuple[np.ndarray, np.ndarray]:
    """Known points from a sparse metric depth image of the same size.

    Args:
        sparse: (H, W) depth in metres; 0 or NaN where unknown.
        relative: (H, W) relative depth map.

    Returns:
        ``(relative_at_points, metres)``, two (N,) float64 arrays.
    """
    sparse = np.asarray(sparse, np.float64)
    rel = np.asarray(relative, np.float64)
    if sparse.shape != rel.shape:
        raise ValueError(
            f'The sparse depth image is {sparse.shape[::-1]} (W, H) but the '
            f'relative depth map is {rel.shape[::-1]}: resize the sparse '
            'depth (nearest) to the map, or run the model at its size.')
    known = np.isfinite(sparse) & (sparse > 0)
    return rel[known], sparse[known]
