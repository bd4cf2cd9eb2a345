"""3D error metric for Sapiens2 pointmaps."""
import logging
from typing import Dict, List, Literal, Optional, Sequence, Tuple

import numpy as np
from mmengine.logging import print_log
from mmseg.registry import METRICS

from .vector_map_metric import VectorMapMetric

__all__ = ['SapiensPointmapMetric', 'align_scale', 'pointmap_errors']


def align_scale(pred: np.ndarray, gt: np.ndarray) -> float:
    """Least-squares scale ``s`` minimising ``sum ||s * pred - gt||^2``.

    Args:
        pred: (M, 3) predicted points.
        gt: (M, 3) ground-truth points.

    Returns:
        ``sum(pred . gt) / sum(pred . pred)``; 0 for an all-zero prediction.
    """
    pred = np.asarray(pred, np.float64)
    denom = float((pred * pred).sum())
    if denom <= 1e-24:
        return 0.0
    return float((pred * np.asarray(gt, np.float64)).sum() / denom)


def pointmap_errors(pred: np.ndarray, gt: np.ndarray,
                    align: Literal['scale', 'none'] = 'scale',
                    thresholds: Sequence[float] = (0.05, 0.1, 0.2)
                    ) -> Tuple[dict, float]:
    """Sums of the per-pixel errors of one image, to pool over a dataset.

    Args:
        pred: (M, 3) predicted points at the valid pixels.
        gt: (M, 3) ground truth (Z > 0).
        align: ``'scale'`` to multiply ``pred`` by :func:`align_scale`
            first, ``'none'`` to compare it as is.
        thresholds: Distances of the ``within`` counts.

    Returns:
        ``(sums, scale)``: ``count``, ``l2`` (sum of ``||e||``), ``sq``
        (sum of ``||e||^2``), ``abs`` (per-axis sums of ``|e|``),
        ``within`` (counts below each threshold), ``raw_l2`` (sum of
        ``||pred - gt||`` before alignment), ``depth_abs_rel`` (sum of
        ``|z - z_gt| / z_gt``) and ``depth_sq`` (sum of ``(z - z_gt)^2``),
        with ``e = s * pred - gt``; and the scale ``s`` used.
    """
    pred = np.asarray(pred, np.float64)
    gt = np.asarray(gt, np.float64)
    scale = align_scale(pred, gt) if align == 'scale' else 1.0
    err = scale * pred - gt
    dist = np.linalg.norm(err, axis=1)
    sums = dict(
        count=int(dist.size),
        l2=float(dist.sum()),
        sq=float((dist**2).sum()),
        abs=[float(v) for v in np.abs(err).sum(axis=0)],
        within=[int((dist < t).sum()) for t in thresholds],
        raw_l2=float(np.linalg.norm(pred - gt, axis=1).sum()),
        depth_abs_rel=float((np.abs(err[:, 2]) / gt[:, 2]).sum()),
        depth_sq=float((err[:, 2]**2).sum()))
    return sums, scale


@METRICS.register_module()
class SapiensPointmapMetric(VectorMapMetric):
    """3D and depth errors of predicted metric pointmaps on the foreground.

    A pixel is evaluated where the ground-truth point is finite with
    ``Z > 0`` (``GeneratePointmapTarget(canonical=False)`` zeroes the
    background) and the prediction is finite. With ``align='scale'``
    (default) each image's prediction is first multiplied by the
    least-squares scale (:func:`align_scale`), the protocol for a camera of
    unknown focal length; ``'none'`` evaluates the predicted metric scale
    itself. Errors are pooled over every evaluated pixel of the dataset:

    * ``l2_mean`` and ``rmse`` of the 3D distance, ``x_mae`` / ``y_mae`` /
      ``z_mae`` per axis (ground-truth units, e.g. metres);
    * ``within_<t>``: percentage of pixels closer than ``t`` (0.05, 0.1,
      0.2 by default);
    * ``depth_abs_rel`` and ``depth_rmse``: the depth (Z) of the aligned
      prediction against the ground-truth depth;
    * ``raw_l2_mean``: the 3D distance before alignment.

    Args:
        align: ``'scale'`` or ``'none'``.
        thresholds: Distances of the ``within_*`` percentages.
        output_dir: Also save each prediction as ``<stem>.npy`` ((H, W, 3)
            float32 XYZ).
        format_only: Only save predictions (needs ``output_dir``).
        collect_device: ``'cpu'`` or ``'gpu'``.
        prefix: Metric name prefix. Defaults to ``'pointmap'``.
    """
    default_prefix: Optional[str] = 'pointmap'
    pred_key = 'pred_pointmap'
    gt_key = 'gt_pointmap'

    def __init__(self,
                 align: Literal['scale', 'none'] = 'scale',
                 thresholds: Sequence[float] = (0.05, 0.1, 0.2),
                 output_dir: Optional[str] = None,
                 format_only: bool = False,
                 collect_device: str = 'cpu',
                 prefix: Optional[str] = None) -> None:
        super().__init__(output_dir, format_only, collect_device, prefix)
        if align not in ('scale', 'none'):
            raise ValueError(f"align must be 'scale' or 'none', got "
                             f'{align!r}.')
        self.align = align
        self.thresholds = tuple(float(t) for t in thresholds)

    @property
    def metric_names(self) -> List[str]:
        """Names of the computed values, in order."""
        return (['l2_mean', 'rmse', 'x_mae', 'y_mae', 'z_mae'] +
                [f'within_{t:g}' for t in self.thresholds] +
                ['depth_abs_rel', 'depth_rmse', 'raw_l2_mean'])

    def process(self, data_batch: dict, data_samples: Sequence[dict]) -> None:
        """Accumulate the errors of a batch.

        Args:
            data_batch: The batch (unused).
            data_samples: Model outputs as dicts with ``pred_pointmap``
                (3, H, W) and (unless ``format_only``) ``gt_pointmap``
                (3, H, W), both metric.
        """
        for pred, gt in self.pairs(data_samples):
            pred = pred.reshape(3, -1).T
            gt = gt.reshape(3, -1).T
            valid = (np.isfinite(gt).all(1) & np.isfinite(pred).all(1) &
                     (np.nan_to_num(gt[:, 2]) > 0))
            sums, _ = pointmap_errors(pred[valid], gt[valid], self.align,
                                      self.thresholds)
            self.results.append(sums)

    def compute_metrics(self, results: List[dict]) -> Dict[str, float]:
        """Pool the accumulated sums.

        Returns:
            ``{name: value}`` for every name in :attr:`metric_names` (NaN
            when no pixel had a valid ground truth).
        """
        if self.format_only_done():
            return {}
        total = sum(r['count'] for r in results)
        if total == 0:
            print_log('No pixel with a valid ground-truth point: every '
                      'pointmap metric is NaN.', logger='current',
                      level=logging.WARNING)
            return {k: float('nan') for k in self.metric_names}

        def pooled(key):
            return sum(r[key] for r in results) / total

        axes = np.sum([r['abs'] for r in results], axis=0) / total
        out = dict(l2_mean=pooled('l2'), rmse=float(np.sqrt(pooled('sq'))),
                   x_mae=float(axes[0]), y_mae=float(axes[1]),
                   z_mae=float(axes[2]))
        for i, t in enumerate(self.thresholds):
            out[f'within_{t:g}'] = 100.0 * sum(
                r['within'][i] for r in results) / total
        out['depth_abs_rel'] = pooled('depth_abs_rel')
        out['depth_rmse'] = float(np.sqrt(pooled('depth_sq')))
        out['raw_l2_mean'] = pooled('raw_l2')
        return out
