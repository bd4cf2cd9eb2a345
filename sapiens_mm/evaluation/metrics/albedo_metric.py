"""Error metric for Sapiens2 albedo."""
import logging
from typing import Dict, List, Optional, Sequence

import numpy as np
from mmengine.logging import print_log
from mmseg.registry import METRICS

from .vector_map_metric import VectorMapMetric

__all__ = ['SapiensAlbedoMetric']


@METRICS.register_module()
class SapiensAlbedoMetric(VectorMapMetric):
    """Per-channel errors of predicted albedo on the foreground.

    A pixel is evaluated where the ground truth is finite and non-negative
    in every channel (``GenerateAlbedoTarget`` writes -1 elsewhere). Over
    every evaluated value (pixel x channel) of the dataset: ``mae``,
    ``rmse`` and ``psnr = 10 log10(1 / mse)`` (dB, albedo in [0, 1]).

    Args:
        output_dir: Also save each prediction as ``<stem>.npy`` ((H, W, 3)
            float32 RGB).
        format_only: Only save predictions (needs ``output_dir``).
        collect_device: ``'cpu'`` or ``'gpu'``.
        prefix: Metric name prefix. Defaults to ``'albedo'``.
    """
    default_prefix: Optional[str] = 'albedo'
    pred_key = 'pred_albedo_map'
    gt_key = 'gt_albedo_map'

    def __init__(self,
                 output_dir: Optional[str] = None,
                 format_only: bool = False,
                 collect_device: str = 'cpu',
                 prefix: Optional[str] = None) -> None:
        super().__init__(output_dir, format_only, collect_device, prefix)

    def process(self, data_batch: dict, data_samples: Sequence[dict]) -> None:
        """Accumulate the errors of a batch of samples with
        ``pred_albedo_map`` and ``gt_albedo_map`` (3, H, W)."""
        for pred, gt in self.pairs(data_samples):
            valid = (np.isfinite(gt) & (gt >= 0)).all(0) & np.isfinite(
                pred).all(0)
            err = pred[:, valid] - gt[:, valid]
            self.results.append(
                dict(count=int(err.size), abs=float(np.abs(err).sum()),
                     sq=float((err**2).sum())))

    def compute_metrics(self, results: List[dict]) -> Dict[str, float]:
        """``mae``, ``rmse`` and ``psnr`` (NaN without a valid pixel)."""
        if self.format_only_done():
            return {}
        total = sum(r['count'] for r in results)
        if total == 0:
            print_log('No pixel with a valid ground-truth albedo: every '
                      'albedo metric is NaN.', logger='current',
                      level=logging.WARNING)
            return dict(mae=float('nan'), rmse=float('nan'),
                        psnr=float('nan'))
        mse = sum(r['sq'] for r in results) / total
        return dict(
            mae=sum(r['abs'] for r in results) / total,
            rmse=float(np.sqrt(mse)),
            psnr=float(10 * np.log10(1.0 / max(mse, 1e-12))))
