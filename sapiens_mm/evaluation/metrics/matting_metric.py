"""The standard alpha-matting errors (Rhemann et al., CVPR 2009).

Definitions as in the alphamatting.com benchmark and its reference code,
with alphas in [0, 1] and every error over a region R (the whole image, or
the unknown band of a trimap):

* SAD: ``sum_R |a - g|``, reported / 1000;
* MSE: ``mean_R (a - g)^2``;
* Gradient: ``sum_R (|grad a| - |grad g|)^2``, reported / 1000, with both
  alphas min-max normalised and the gradients taken with first-derivative-
  of-Gaussian filters (sigma 1.4, normalised to unit L2 norm, replicated
  borders);
* Connectivity: ``sum_R |phi(a) - phi(g)|``, reported / 1000, where
  ``phi(x) = 1 - (x - l) [x - l >= 0.15]`` and ``l`` is, per pixel, the
  highest threshold (steps of 0.1) at which it is still in the largest
  4-connected component of ``{a >= t} & {g >= t}`` (1 if it always is).
"""
import logging
from typing import Dict, List, Optional, Sequence

import cv2
import numpy as np
from mmengine.evaluator import BaseMetric
from mmengine.logging import print_log
from mmseg.registry import METRICS

from .depth_metric import save_prediction, to_numpy

__all__ = ['MattingMetric', 'sad_error', 'mse_error', 'gradient_error',
           'connectivity_error', 'unknown_region', 'gaussian_gradient']


def _region(alpha: np.ndarray, region: Optional[np.ndarray]) -> np.ndarray:
    return (np.ones(alpha.shape, bool) if region is None else
            np.asarray(region, bool))


def sad_error(pred: np.ndarray, gt: np.ndarray,
              region: Optional[np.ndarray] = None) -> float:
    """Sum of absolute differences over ``region`` (all pixels if None),
    divided by 1000."""
    r = _region(gt, region)
    return float(np.abs(pred[r] - gt[r]).sum() / 1000.0)


def mse_error(pred: np.ndarray, gt: np.ndarray,
              region: Optional[np.ndarray] = None) -> float:
    """Mean squared difference over ``region`` (NaN when it is empty)."""
    r = _region(gt, region)
    if not r.any():
        return float('nan')
    return float(((pred[r] - gt[r])**2).mean())


def _gauss_filters(sigma: float, epsilon: float = 1e-2):
    """The reference code's derivative-of-Gaussian filter pair: size from
    where the Gaussian falls below ``epsilon``, x filter
    ``G(i) G'(j)``, scaled to unit L2 norm; y is its transpose."""
    half = int(np.ceil(sigma * np.sqrt(
        -2.0 * np.log(np.sqrt(2.0 * np.pi) * sigma * epsilon))))
    t = np.arange(-half, half + 1, dtype=np.float64)
    g = np.exp(-t**2 / (2.0 * sigma**2)) / (sigma * np.sqrt(2.0 * np.pi))
    dg = -t * g / sigma**2
    fx = g[:, None] * dg[None, :]
    fx /= np.sqrt((fx**2).sum())
    return fx, fx.T


def gaussian_gradient(alpha: np.ndarray, sigma: float = 1.4) -> np.ndarray:
    """Gradient magnitude of (H, W) ``alpha`` with the derivative-of-
    Gaussian filters of the reference code (replicated borders)."""
    fx, fy = _gauss_filters(sigma)
    a = np.asarray(alpha, np.float64)
    gx = cv2.filter2D(a, cv2.CV_64F, fx, borderType=cv2.BORDER_REPLICATE)
    gy = cv2.filter2D(a, cv2.CV_64F, fy, borderType=cv2.BORDER_REPLICATE)
    return np.sqrt(gx**2 + gy**2)


def _minmax(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, np.float64)
    span = a.max() - a.min()
    return (a - a.min()) / span if span > 0 else np.zeros_like(a)


def gradient_error(pred: np.ndarray, gt: np.ndarray,
                   region: Optional[np.ndarray] = None,
                   sigma: float = 1.4) -> float:
    """Squared difference of the :func:`gaussian_gradient` magnitudes of
    the min-max normalised alphas, summed over ``region``, / 1000."""
    r = _region(gt, region)
    diff = gaussian_gradient(_minmax(pred), sigma) - gaussian_gradient(
        _minmax(gt), sigma)
    return float((diff[r]**2).sum() / 1000.0)


def connectivity_error(pred: np.ndarray, gt: np.ndarray,
                       region: Optional[np.ndarray] = None,
                       step: float = 0.1) -> float:
    """Connectivity error (see the module docstring) over ``region``,
    / 1000."""
    r = _region(gt, region)
    pred = np.asarray(pred, np.float64)
    gt = np.asarray(gt, np.float64)
    steps = np.arange(0.0, 1.0 + step / 2, step)
    level = -np.ones_like(gt)
    for i in range(1, len(steps)):
        both = ((gt >= steps[i]) & (pred >= steps[i])).astype(np.uint8)
        count, labels, stats, _ = cv2.connectedComponentsWithStats(
            both, connectivity=4)
        largest = np.zeros(gt.shape, bool)
        if count > 1:
            largest = labels == 1 + int(np.argmax(stats[1:, -1]))
        fresh = (level == -1) & ~largest
        level[fresh] = steps[i - 1]
    level[level == -1] = 1.0
    gt_d, pred_d = gt - level, pred - level
    gt_phi = 1.0 - gt_d * (gt_d >= 0.15)
    pred_phi = 1.0 - pred_d * (pred_d >= 0.15)
    return float(np.abs(gt_phi - pred_phi)[r].sum() / 1000.0)


def unknown_region(gt: np.ndarray, radius: int = 10) -> np.ndarray:
    """The unknown band of the trimap made from ground-truth alpha: pixels
    with ``0 < alpha < 1``, dilated by a (2 radius + 1) square (the usual
    way to evaluate sets that ship no trimap, such as P3M-10k)."""
    soft = ((gt > 0) & (gt < 1)).astype(np.uint8)
    if radius <= 0:
        return soft.astype(bool)
    kernel = np.ones((2 * radius + 1, 2 * radius + 1), np.uint8)
    return cv2.dilate(soft, kernel).astype(bool)


@METRICS.register_module()
class MattingMetric(BaseMetric):
    """SAD, MSE, Gradient and Connectivity errors of predicted alpha
    (Rhemann et al., CVPR 2009), over the whole image and over the unknown
    region of the trimap.

    Reads ``pred_alpha`` and ``gt_alpha`` ((1, H, W) in [0, 1]) of each
    sample. The trimap's unknown region is ``0 < gt < 1`` dilated by
    ``trimap_radius`` pixels (:func:`unknown_region`). Each error is
    computed per image and averaged over the images. Keys: ``sad``,
    ``mse``, ``grad``, ``conn`` (whole image) and ``sad_unknown``,
    ``mse_unknown``, ``grad_unknown``, ``conn_unknown``; SAD, Gradient and
    Connectivity are / 1000 as in the literature. An image without an
    unknown pixel counts 0 for the sums and is skipped for
    ``mse_unknown``.

    Args:
        trimap_radius: Dilation of the unknown band in pixels. Defaults to
            10.
        output_dir: Also save each predicted alpha as ``<stem>.npy``
            ((H, W, 1) float32).
        collect_device: ``'cpu'`` or ``'gpu'``.
        prefix: Metric name prefix. Defaults to ``'matting'``.
    """
    default_prefix: Optional[str] = 'matting'
    ERRORS = (('sad', sad_error), ('mse', mse_error),
              ('grad', gradient_error), ('conn', connectivity_error))

    def __init__(self,
                 trimap_radius: int = 10,
                 output_dir: Optional[str] = None,
                 collect_device: str = 'cpu',
                 prefix: Optional[str] = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        self.trimap_radius = int(trimap_radius)
        self.output_dir = output_dir
        self._saved = 0

    def process(self, data_batch: dict, data_samples: Sequence[dict]) -> None:
        """Compute the errors of each sample."""
        for sample in data_samples:
            pred = to_numpy(sample['pred_alpha']['data'])
            if self.output_dir:
                save_prediction(self.output_dir, sample,
                                pred.transpose(1, 2, 0).astype(np.float32),
                                self._saved)
                self._saved += 1
            if 'gt_alpha' not in sample:
                raise KeyError('MattingMetric needs gt_alpha in the samples: '
                               'put LoadMattingAnnotations (after the resize)'
                               ' and PackDenseInputs in the test pipeline.')
            gt = to_numpy(sample['gt_alpha']['data'])
            if gt.shape != pred.shape:
                raise ValueError(
                    f'Predicted alpha {pred.shape} and ground truth '
                    f'{gt.shape} differ: load the matte after the resize in '
                    'the test pipeline so it keeps the original size.')
            pred = np.clip(np.nan_to_num(pred[0].astype(np.float64)), 0, 1)
            gt = gt[0].astype(np.float64)
            unknown = unknown_region(gt, self.trimap_radius)
            result = {}
            for name, fn in self.ERRORS:
                result[name] = fn(pred, gt)
                result[f'{name}_unknown'] = fn(pred, gt, unknown)
            self.results.append(result)

    def compute_metrics(self, results: List[dict]) -> Dict[str, float]:
        """Mean of each error over the images."""
        if not results:
            print_log('MattingMetric got no sample.', logger='current',
                      level=logging.WARNING)
            return {}
        out = {}
        for key in results[0]:
            values = [r[key] for r in results if np.isfinite(r[key])]
            out[key] = float(np.mean(values)) if values else float('nan')
        return out
