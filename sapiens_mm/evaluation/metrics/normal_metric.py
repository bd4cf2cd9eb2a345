"""Angular-error metric for surface normals."""
import logging
from typing import Dict, List, Optional, Sequence

import numpy as np
from mmengine.logging import print_log
from mmseg.registry import METRICS

from .vector_map_metric import VectorMapMetric

__all__ = ['SapiensNormalMetric', 'angular_error']


def angular_error(pred: np.ndarray, gt: np.ndarray) -> np.ndarray:
    """Angle in degrees between vectors.

    Args:
        pred: (M, 3) predicted normals (any non-zero length; a zero vector
            counts as 90 degrees off).
        gt: (M, 3) non-zero ground-truth normals.

    Returns:
        (M, ) angles in [0, 180].
    """
    p = pred / np.maximum(np.linalg.norm(pred, axis=1, keepdims=True), 1e-12)
    g = gt / np.linalg.norm(gt, axis=1, keepdims=True)
    cos = np.clip((p * g).sum(axis=1), -1.0, 1.0)
    return np.degrees(np.arccos(cos))


@METRICS.register_module()
class SapiensNormalMetric(VectorMapMetric):
    """Angular error of predicted normals on the foreground.

    A pixel is evaluated when its ground-truth normal is finite and non-zero
    (Sapiens normal targets are the zero vector on the background). The
    angle between prediction and ground truth is pooled over all evaluated
    pixels of the dataset:

    * ``mean``, ``median`` and ``rmse`` of the angle, in degrees;
    * ``within_<t>``: the percentage of pixels with an angle below each
      threshold ``t`` (11.25, 22.5 and 30 degrees by default).

    The median is read from a histogram of ``bin_width`` degrees (its error
    is at most half a bin), so memory does not grow with image size; the
    other values are exact.

    Args:
        thresholds: Angles (degrees) of the ``within_*`` percentages.
        bin_width: Histogram bin of the median, degrees. Defaults to 0.01.
        eps: Minimum length of a valid ground-truth normal.
        output_dir: Also save each prediction as ``<stem>.npy``
            ((H, W, 3) float32 unit normals).
        format_only: Only save predictions (needs ``output_dir``).
        collect_device: ``'cpu'`` or ``'gpu'`` for distributed collection.
        prefix: Metric name prefix. Defaults to ``'normal'``.
    """
    default_prefix: Optional[str] = 'normal'
    pred_key = 'pred_normal_map'
    gt_key = 'gt_normal_map'

    def __init__(self,
                 thresholds: Sequence[float] = (11.25, 22.5, 30.0),
                 bin_width: float = 0.01,
                 eps: float = 1e-6,
                 output_dir: Optional[str] = None,
                 format_only: bool = False,
                 collect_device: str = 'cpu',
                 prefix: Optional[str] = None) -> None:
        super().__init__(output_dir, format_only, collect_device, prefix)
        if bin_width <= 0:
            raise ValueError(f'bin_width must be positive, got {bin_width}.')
        self.thresholds = tuple(float(t) for t in thresholds)
        self.bin_width = float(bin_width)
        self.eps = eps

    @property
    def metric_names(self) -> List[str]:
        """Names of the computed values, in order."""
        return ['mean', 'median', 'rmse'] + [
            f'within_{t:g}' for t in self.thresholds
        ]

    def process(self, data_batch: dict, data_samples: Sequence[dict]) -> None:
        """Accumulate the angular errors of a batch.

        Args:
            data_batch: The batch from the dataloader (unused).
            data_samples: Model outputs as dicts with ``pred_normal_map``
                (3, H, W) and (unless ``format_only``) ``gt_normal_map``
                (3, H, W).
        """
        for pred, gt in self.pairs(data_samples):
            pred = pred.reshape(3, -1).T
            gt = gt.reshape(3, -1).T
            valid = (np.isfinite(gt).all(1) & np.isfinite(pred).all(1) &
                     (np.linalg.norm(np.nan_to_num(gt), axis=1) > self.eps))
            angle = angular_error(pred[valid], gt[valid])
            bins, counts = np.unique(
                np.floor(angle / self.bin_width).astype(np.int64),
                return_counts=True)
            self.results.append(
                dict(count=int(angle.size),
                     sum=float(angle.sum()),
                     sum_sq=float((angle**2).sum()),
                     within=[int((angle < t).sum())
                             for t in self.thresholds],
                     bins=bins,
                     bin_counts=counts))

    def compute_metrics(self, results: List[dict]) -> Dict[str, float]:
        """Pool the accumulated errors.

        Returns:
            ``{name: value}`` for every name in :attr:`metric_names` (NaN
            when no pixel had a valid ground truth).
        """
        if self.format_only_done():
            return {}
        total = sum(r['count'] for r in results)
        if total == 0:
            print_log('No pixel with a valid ground-truth normal: every '
                      'normal metric is NaN.', logger='current',
                      level=logging.WARNING)
            return {k: float('nan') for k in self.metric_names}
        bins = np.concatenate([r['bins'] for r in results])
        counts = np.concatenate([r['bin_counts'] for r in results])
        order = np.argsort(bins, kind='stable')
        bins, counts = bins[order], counts[order]
        cumulative = np.cumsum(counts)
        # the two middle values (one when the count is odd), 1-based ranks
        middle = bins[np.searchsorted(cumulative,
                                      [(total + 1) // 2, total // 2 + 1])]
        out = dict(
            mean=sum(r['sum'] for r in results) / total,
            median=(float(middle.mean()) + 0.5) * self.bin_width,
            rmse=float(np.sqrt(sum(r['sum_sq'] for r in results) / total)))
        for i, t in enumerate(self.thresholds):
            out[f'within_{t:g}'] = 100.0 * sum(
                r['within'][i] for r in results) / total
        return out
