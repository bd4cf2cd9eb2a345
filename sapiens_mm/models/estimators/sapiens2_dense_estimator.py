"""Dense estimator for the Sapiens2 normal, pointmap, albedo and matting
models."""
from typing import Dict, Optional, Sequence

import torch
import torch.nn.functional as F
from mmengine.structures import PixelData
from mmseg.models.utils import resize
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample
from torch import Tensor

from .sapiens_dense_estimator import SapiensDenseEstimator

__all__ = [
    'Sapiens2DenseEstimator', 'gaussian_blur3x3', 'finish_prediction',
    'prediction_fields'
]

#: Data-sample field of each Sapiens2 dense task's prediction.
PRED_KEY = dict(normal='pred_normal_map', pointmap='pred_pointmap',
                albedo='pred_albedo_map', matting='pred_matting')


def gaussian_blur3x3(x: Tensor, sigma: float = 0.8,
                     passes: int = 1) -> Tensor:
    """Blur every channel of (N, C, H, W) ``x`` with a normalised 3x3
    Gaussian kernel, ``passes`` times, reflecting at the border (OpenCV's
    default ``BORDER_REFLECT_101``)."""
    t = torch.tensor([-1.0, 0.0, 1.0], dtype=x.dtype, device=x.device)
    g = torch.exp(-t * t / (2 * sigma * sigma))
    g = g / g.sum()
    kernel = (g[:, None] * g[None, :]).expand(x.shape[1], 1, 3, 3)
    for _ in range(passes):
        x = F.conv2d(F.pad(x, (1, 1, 1, 1), mode='reflect'), kernel,
                     groups=x.shape[1])
    return x


def finish_prediction(task: str, pred: Tensor,
                      size: Optional[Sequence[int]] = None,
                      align_corners: bool = False) -> Tensor:
    """The official per-task post-processing of a cropped (un-padded)
    (1, C, h, w) prediction: normals L2-normalised (clamp 1e-8), albedo
    clamped to [0, 1], then a bilinear resize to ``size`` (H, W) (None:
    none); a pointmap is first blurred by 4 passes of a 3x3 Gaussian
    (sigma 0.8) when the resize upsamples; a matte (pre-multiplied
    foreground and alpha) is clamped to [0, 1] after the resize.

    Returns:
        (C, H, W).
    """
    if task == 'normal':
        pred = F.normalize(pred, dim=1, eps=1e-8)
    elif task == 'albedo':
        pred = pred.clamp(0.0, 1.0)
    if size is not None:
        size = tuple(int(s) for s in size[:2])
        if task == 'pointmap' and (size[0] > pred.shape[-2]
                                   or size[1] > pred.shape[-1]):
            pred = gaussian_blur3x3(pred, sigma=0.8, passes=4)
        pred = resize(pred, size=size, mode='bilinear',
                      align_corners=align_corners, warning=False)
    if task == 'matting':
        pred = pred.clamp(0.0, 1.0)
    return pred[0]


def prediction_fields(task: str, pred: Tensor) -> Dict[str, PixelData]:
    """The data-sample fields of a (C, H, W) prediction: its task's field,
    for a pointmap also ``pred_depth_map`` (1, H, W), its Z, and for a
    matte (4, H, W) also ``pred_alpha`` (1, H, W) and ``pred_foreground``
    (3, H, W, pre-multiplied RGB)."""
    data = {PRED_KEY[task]: PixelData(data=pred)}
    if task == 'pointmap':
        data['pred_depth_map'] = PixelData(data=pred[2:3])
    elif task == 'matting':
        data['pred_alpha'] = PixelData(data=pred[3:4])
        data['pred_foreground'] = PixelData(data=pred[:3])
    return data


@MODELS.register_module()
class Sapiens2DenseEstimator(SapiensDenseEstimator):
    """:class:`SapiensDenseEstimator` for the Sapiens2 dense tasks, with the
    official post-processing.

    Tasks, their heads and outputs (at ``ori_shape``, after cropping the
    ``ResizePadImage`` padding and undoing pipeline flips):

    * ``'normal'`` (:class:`Sapiens2NormalHead`): ``pred_normal_map``
      (3, h, w), L2-normalised (clamp 1e-8) *before* the bilinear resize
      and not renormalised after it, as officially;
    * ``'pointmap'`` (:class:`Sapiens2PointmapHead`): ``pred_pointmap``
      (3, h, w), the metric camera-frame XYZ (canonical pointmap divided by
      the predicted scale), blurred by 4 passes of a 3x3 Gaussian
      (sigma 0.8) before an upsampling resize; ``pred_depth_map`` (1, h, w)
      is its Z;
    * ``'albedo'`` (:class:`Sapiens2AlbedoHead`): ``pred_albedo_map``
      (3, h, w), clamped to [0, 1] before the resize;
    * ``'matting'`` (:class:`Sapiens2MattingHead`): ``pred_matting``
      (4, h, w: pre-multiplied foreground RGB, alpha), resized then
      clamped to [0, 1] (the whole frame is stretched to the input size,
      so there is no padding to crop); ``pred_alpha`` (1, h, w) and
      ``pred_foreground`` (3, h, w) are its parts.

    A horizontal flip (pipeline or ``test_cfg.flip``) negates X of normals
    and points.

    Args:
        task: ``'normal'``, ``'pointmap'``, ``'albedo'`` or ``'matting'``.
        **kwargs: As for :class:`SapiensDenseEstimator`.
    """
    OUT_CHANNELS = dict(normal=3, pointmap=3, albedo=3, matting=4)
    TARGET_KEY = dict(normal='gt_normal_map', pointmap='gt_pointmap',
                      albedo='gt_albedo_map', matting='gt_matting')
    PRED_KEY = PRED_KEY
    INVALID = dict(normal=0.0, pointmap=0.0, albedo=-1.0, matting=-1.0)
    FLIP_NEGATES = ('normal', 'pointmap')

    def __init__(self,
                 task: str = 'normal',
                 **kwargs) -> None:
        super().__init__(task=task, **kwargs)

    def _postprocess_one(self, pred: Tensor,
                         meta: Optional[dict]) -> Tensor:
        """(1, C, H, W) -> (C, h, w): crop the padding, undo a pipeline flip,
        then :func:`finish_prediction` at ``ori_shape``."""
        if meta is None:
            return finish_prediction(self.task, pred)
        pred = self.crop_padding(pred, meta)
        if meta.get('flip', False):
            pred = self.unflip(pred, meta.get('flip_direction',
                                              'horizontal'))
        return finish_prediction(self.task, pred, meta.get('ori_shape'),
                                 self.align_corners)

    def _set_prediction(self, sample: SegDataSample, pred: Tensor) -> None:
        """Store the prediction (and, for pointmaps, its depth)."""
        sample.set_data(prediction_fields(self.task, pred))
