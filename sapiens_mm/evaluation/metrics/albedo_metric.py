"""Error metric for Sapiens2 albedo."""
import logging
from typing import Dict, List, Optional, Sequence

import numpy as np
from mmengine.evaluator import BaseMetric
from mmengine.logging import print_log
from mmseg.registry import METRICS

from .depth_metric import save_prediction, to_numpy

__all__ = ['SapiensAlbedoMetric']


@METRICS.register_module()
class SapiensAlbedoMetric(BaseMetric):
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

    def __init__(self,
                 output_dir: Optional[str] = None,
                 format_only: bool = False,
                 collect_device: str = 'cpu',
                 prefix: Optional[str] = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        if format_only and not output_dir:
            raise ValueError('format_only=True saves predictions only; set '
                             'output_dir too.')
        self.output_dir = output_dir
        self.format_only = format_only
        self._saved = 0

    def process(self, data_batch: dict, data_samples: Sequence[dict]) -> None:
        """Accumulate the errors of a batch of samples with
        ``pred_albedo_map`` and ``gt_albedo_map`` (3, H, W)."""
        for sample in data_samples:
            pred = to_numpy(sample['pred_albedo_map']['data'])
            if self.output_dir:
                save_prediction(self.output_dir, sample,
                                pred.transpose(1, 2, 0).astype(np.float32),
                                self._saved)
                self._saved += 1
            if self.format_only:
                continue
            if 'gt_albedo_map' not in sample:
                raise KeyError('SapiensAlbedoMetric needs gt_albedo_map in '
                               'the samples (or format_only=True).')
            gt = to_numpy(sample['gt_albedo_map']['data'])
            if gt.shape != pred.shape:
                raise ValueError(
                    f'Prediction {pred.shape} and ground truth {gt.shape} '
                    'must have the same (3, H, W) shape; load annotations '
                    'after the resize in the test pipeline.')
            valid = (np.isfinite(gt) & (gt >= 0)).all(0) & np.isfinite(
                pred).all(0)
            err = pred[:, valid] - gt[:, valid]
            self.results.append(
                dict(count=int(err.size), abs=float(np.abs(err).sum()),
                     sq=float((err**2).sum())))

    def compute_metrics(self, results: List[dict]) -> Dict[str, float]:
        """``mae``, ``rmse`` and ``psnr`` (NaN without a valid pixel)."""
        if self.format_only:
            print_log(f'Predictions saved to {self.output_dir}',
                      logger='current')
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
