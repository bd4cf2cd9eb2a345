"""What the metrics of (3, H, W) dense predictions share."""
from typing import Iterator, Optional, Sequence, Tuple

import numpy as np
from mmengine.evaluator import BaseMetric
from mmengine.logging import print_log

from .depth_metric import save_prediction, to_numpy

__all__ = ['VectorMapMetric']


class VectorMapMetric(BaseMetric):
    """Base of the normal, pointmap and albedo metrics: reads each sample's
    (3, H, W) prediction and ground truth, optionally saving the prediction
    as ``<stem>.npy`` ((H, W, 3) float32), or only saving it.

    Subclasses set :attr:`pred_key` / :attr:`gt_key` and call
    :meth:`pairs` in ``process`` and :meth:`format_only_done` first in
    ``compute_metrics``.

    Args:
        output_dir: Also save each prediction there.
        format_only: Only save predictions (needs ``output_dir``).
        collect_device: ``'cpu'`` or ``'gpu'`` for distributed collection.
        prefix: Metric name prefix.
    """
    pred_key: str = ''
    gt_key: str = ''

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

    def pairs(self, data_samples: Sequence[dict]
              ) -> Iterator[Tuple[np.ndarray, np.ndarray]]:
        """``(pred, gt)`` float64 (3, H, W) arrays of each sample (none with
        ``format_only``), after saving the prediction if asked.

        Raises:
            KeyError: A sample without the ground truth.
            ValueError: Prediction and ground truth of different shapes.
        """
        for sample in data_samples:
            pred = to_numpy(sample[self.pred_key]['data'])
            if self.output_dir:
                save_prediction(self.output_dir, sample,
                                pred.transpose(1, 2, 0).astype(np.float32),
                                self._saved)
                self._saved += 1
            if self.format_only:
                continue
            if self.gt_key not in sample:
                raise KeyError(f'{type(self).__name__} needs {self.gt_key} '
                               'in the samples (or format_only=True).')
            gt = to_numpy(sample[self.gt_key]['data'])
            if gt.shape != pred.shape or gt.shape[0] != 3:
                raise ValueError(
                    f'Prediction {pred.shape} and ground truth {gt.shape} '
                    'must both be (3, H, W): load annotations after Resize '
                    '(or ResizePadImage) in the test pipeline so the ground '
                    'truth keeps the original image size.')
            yield pred, gt

    def format_only_done(self) -> bool:
        """With ``format_only``: log where the predictions went, True."""
        if self.format_only:
            print_log(f'Predictions saved to {self.output_dir}',
                      logger='current')
        return self.format_only
