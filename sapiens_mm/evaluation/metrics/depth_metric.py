"""Relative-depth metric with per-image scale-and-shift alignment."""
import logging
import os
import os.path as osp
from typing import Dict, List, Literal, Optional, Sequence, Tuple

import numpy as np
from mmengine.evaluator import BaseMetric
from mmengine.logging import print_log
from mmseg.registry import METRICS

__all__ = [
    'SapiensDepthMetric', 'align_scale_shift', 'save_prediction', 'to_numpy'
]


def align_scale_shift(pred: np.ndarray,
                      target: np.ndarray) -> Tuple[float, float]:
    """Least-squares ``(scale, shift)`` minimising
    ``sum((scale * pred + shift - target) ** 2)``.

    Args:
        pred: (M, ) predictions at valid pixels.
        target: (M, ) ground truth at the same pixels.

    Returns:
        ``(scale, shift)``; for a constant prediction ``scale`` is 0 and
        ``shift`` the target mean.
    """
    pred = np.asarray(pred, np.float64)
    target = np.asarray(target, np.float64)
    p_mean, t_mean = pred.mean(), target.mean()
    p_var = ((pred - p_mean)**2).mean()
    if p_var <= 1e-24:
        return 0.0, float(t_mean)
    scale = ((pred - p_mean) * (target - t_mean)).mean() / p_var
    return float(scale), float(t_mean - scale * p_mean)


def save_prediction(output_dir: str, sample: dict, array: np.ndarray,
                    index: int) -> str:
    """Save one prediction as ``<output_dir>/<image stem>.npy``.

    Args:
        output_dir: Folder (created if needed).
        sample: Data sample dict; its ``img_path`` names the file
            (``pred_<index>`` without one).
        array: Array to save.
        index: Fallback number for the name.

    Returns:
        The written path.
    """
    os.makedirs(output_dir, exist_ok=True)
    img_path = sample.get('img_path')
    stem = (osp.splitext(osp.basename(img_path))[0]
            if img_path else f'pred_{index:06d}')
    path = osp.join(output_dir, stem + '.npy')
    np.save(path, array)
    return path


def to_numpy(data) -> np.ndarray:
    """A tensor (any device) or array-like as a float64 numpy array."""
    if hasattr(data, 'detach'):
        data = data.detach().cpu().numpy()
    return np.asarray(data, np.float64)


@METRICS.register_module()
class SapiensDepthMetric(BaseMetric):
    """Depth errors on the foreground, after optional alignment.

    For every image, the pixels with a finite ground truth in
    ``(min_depth, max_depth)`` are evaluated (the background of Sapiens
    targets is -1, hence excluded). With ``align='scale_shift'`` the
    prediction is first mapped by the least-squares ``scale * pred + shift``
    fitted to the ground truth on those pixels, the standard protocol for
    relative depth: Sapiens predicts per-image normalised depth, so only an
    affine map of it can be compared with depth in another unit. The
    (aligned) prediction is then clamped to at least ``eps`` and, with
    ``p`` the prediction and ``g`` the ground truth:

    * ``abs_rel`` = ``mean(|p - g| / g)``, ``sq_rel`` = ``mean((p - g)^2 / g)``
    * ``rmse`` = sqrt(mean((p - g)^2)),
      ``rmse_log`` = sqrt(mean((log p - log g)^2))
    * ``log10`` = ``mean(|log10 p - log10 g|)``
    * ``silog`` = sqrt(mean(d^2) - 0.5 mean(d)^2), d = log p - log g
    * ``delta1..3`` = fraction of pixels with max(p/g, g/p) < 1.25^k

    Each value is computed per image and averaged over the images that have
    at least two valid pixels; images without are skipped (all NaN if no
    image qualifies).

    Samples need ``pred_depth_map`` (1, H, W) and ``gt_depth_map``
    (1, H, W) of the same size: load annotations after ``Resize`` in the
    test pipeline so the ground truth stays at the original size.

    Args:
        align: ``'scale_shift'`` (default) or ``'none'``.
        min_depth: Ground truth must be above this. Defaults to 0.
        max_depth: Ground truth must be below this. Defaults to inf.
        eps: Lower clamp of the prediction before ratios and logs.
        output_dir: Also save each raw prediction (the model output at the
            original image size, before any alignment) as ``<stem>.npy``
            ((H, W) float32).
        format_only: Only save predictions (needs ``output_dir``); no
            ground truth is read and no metric computed.
        collect_device: ``'cpu'`` or ``'gpu'`` for distributed collection.
        prefix: Metric name prefix. Defaults to ``'depth'``.
    """
    default_prefix: Optional[str] = 'depth'
    METRICS = ('abs_rel', 'sq_rel', 'rmse', 'rmse_log', 'log10', 'silog',
               'delta1', 'delta2', 'delta3')

    def __init__(self,
                 align: Literal['scale_shift', 'none'] = 'scale_shift',
                 min_depth: float = 0.0,
                 max_depth: float = float('inf'),
                 eps: float = 1e-6,
                 output_dir: Optional[str] = None,
                 format_only: bool = False,
                 collect_device: str = 'cpu',
                 prefix: Optional[str] = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        if align not in ('scale_shift', 'none'):
            raise ValueError(f'align must be "scale_shift" or "none", got '
                             f'{align!r}.')
        if format_only and not output_dir:
            raise ValueError('format_only=True saves predictions only; set '
                             'output_dir too.')
        if eps <= 0:
            raise ValueError(f'eps must be positive, got {eps}.')
        self.align = align
        self.min_depth = min_depth
        self.max_depth = max_depth
        self.eps = eps
        self.output_dir = output_dir
        self.format_only = format_only
        self._saved = 0

    @classmethod
    def image_metrics(cls, pred: np.ndarray, gt: np.ndarray,
                      eps: float = 1e-6) -> Dict[str, float]:
        """Metrics of one image from its valid pixels.

        Args:
            pred: (M, ) positive-clamped predictions.
            gt: (M, ) positive ground truth.
            eps: Lower clamp of ``pred``.
        """
        pred = np.maximum(pred, eps)
        diff = pred - gt
        log_diff = np.log(pred) - np.log(gt)
        ratio = np.maximum(pred / gt, gt / pred)
        silog_var = (log_diff**2).mean() - 0.5 * log_diff.mean()**2
        return dict(
            abs_rel=float((np.abs(diff) / gt).mean()),
            sq_rel=float((diff**2 / gt).mean()),
            rmse=float(np.sqrt((diff**2).mean())),
            rmse_log=float(np.sqrt((log_diff**2).mean())),
            log10=float(np.abs(np.log10(pred) - np.log10(gt)).mean()),
            silog=float(np.sqrt(max(silog_var, 0.0))),
            delta1=float((ratio < 1.25).mean()),
            delta2=float((ratio < 1.25**2).mean()),
            delta3=float((ratio < 1.25**3).mean()))

    def process(self, data_batch: dict, data_samples: Sequence[dict]) -> None:
        """Evaluate each sample of a batch.

        Args:
            data_batch: The batch from the dataloader (unused).
            data_samples: Model outputs as dicts, with ``pred_depth_map`` and
                (unless ``format_only``) ``gt_depth_map``.
        """
        for sample in data_samples:
            pred = to_numpy(sample['pred_depth_map']['data'])
            pred = pred.reshape(pred.shape[-2:])
            if self.output_dir:
                save_prediction(self.output_dir, sample,
                                pred.astype(np.float32), self._saved)
                self._saved += 1
            if self.format_only:
                continue
            if 'gt_depth_map' not in sample:
                raise KeyError('SapiensDepthMetric needs gt_depth_map in the '
                               'samples (or format_only=True).')
            gt = to_numpy(sample['gt_depth_map']['data'])
            gt = gt.reshape(gt.shape[-2:])
            if gt.shape != pred.shape:
                raise ValueError(
                    f'Prediction {pred.shape} and ground truth {gt.shape} '
                    'differ in size: load annotations after Resize in the '
                    'test pipeline so the ground truth keeps the original '
                    'image size.')
            valid = (np.isfinite(gt) & np.isfinite(pred) &
                     (gt > self.min_depth) & (gt < self.max_depth))
            if valid.sum() < 2:
                self.results.append(None)
                continue
            p, g = pred[valid], gt[valid]
            if self.align == 'scale_shift':
                scale, shift = align_scale_shift(p, g)
                p = scale * p + shift
            self.results.append(self.image_metrics(p, g, self.eps))

    def compute_metrics(self, results: List[Optional[dict]]
                        ) -> Dict[str, float]:
        """Average the per-image metrics.

        Returns:
            ``{name: value}`` for every name in ``METRICS``.
        """
        if self.format_only:
            print_log(f'Predictions saved to {self.output_dir}',
                      logger='current')
            return {}
        scored = [r for r in results if r is not None]
        skipped = len(results) - len(scored)
        if skipped:
            print_log(f'{skipped} of {len(results)} images have fewer than 2 '
                      'valid ground-truth pixels and were skipped.',
                      logger='current')
        if not scored:
            print_log('No image with valid depth ground truth: every '
                      'depth metric is NaN.', logger='current',
                      level=logging.WARNING)
            return {k: float('nan') for k in self.METRICS}
        return {k: float(np.mean([r[k] for r in scored]))
                for k in self.METRICS}
