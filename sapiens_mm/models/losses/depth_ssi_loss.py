"""Scale-and-shift-invariant loss for relative depth (MiDaS / DPT style)."""
from typing import Literal

import torch
from mmseg.registry import MODELS
from torch import Tensor, nn

from .depth_silog_loss import PerImageDepthLoss, sqrt_or_zero

__all__ = ['DepthScaleShiftLoss', 'depth_scale_shift_loss']


def depth_scale_shift_loss(pred: Tensor,
                           target: Tensor,
                           eps: float = 1e-6) -> Tensor:
    """Per-image RMSE after the least-squares scale and shift of ``pred``.

    Over the valid pixels (``target > eps`` and finite, the validity rule of
    :func:`~sapiens_mm.models.losses.depth_silog_loss`), ``pred`` is mapped
    by the ``(s, t)`` minimising ``sum((s * pred + t - target)^2)`` (closed
    form, differentiated through), and the loss of one image is the root
    mean square of what is left. This is what
    :class:`~sapiens_mm.evaluation.SapiensDepthMetric` reports as ``rmse``
    (in the target's units). A constant prediction gets ``s = 0`` and the
    standard deviation of the target; an image with no valid pixel gets
    exactly 0 with a zero gradient.

    Args:
        pred: (N, ...) predictions.
        target: (N, ...) targets, same shape; invalid pixels ``<= eps``.
        eps: Validity threshold. Defaults to 1e-6.

    Returns:
        (N, ) loss of each image.
    """
    pred, target = pred.flatten(1), target.flatten(1)
    valid = (target > eps) & torch.isfinite(target)
    w = valid.to(pred.dtype)
    target = torch.where(valid, target, torch.zeros_like(target))
    count = w.sum(dim=1, keepdim=True).clamp(min=1)
    p_mean = (w * pred).sum(dim=1, keepdim=True) / count
    t_mean = (w * target).sum(dim=1, keepdim=True) / count
    p_c, t_c = (pred - p_mean) * w, (target - t_mean) * w
    var = p_c.pow(2).sum(dim=1, keepdim=True) / count
    cov = (p_c * t_c).sum(dim=1, keepdim=True) / count
    # A constant prediction (var 0, hence cov 0) gets scale 0.
    scale = cov / var.clamp(min=1e-12)
    residual = (scale * p_c - t_c) * w
    return sqrt_or_zero(residual.pow(2).sum(dim=1) / count.squeeze(1))


@MODELS.register_module()
class DepthScaleShiftLoss(PerImageDepthLoss, nn.Module):
    """Scale-and-shift-invariant RMSE loss for relative depth.

    Not the official Sapiens loss (that is :class:`DepthSiLogLoss`). On the
    Sapiens target (foreground depth min-max normalised to [0, 1]) the SiLog
    loss works in log space, where the pixels next to the nearest point
    (targets near 0) dominate; from random weights a small model then stays
    at the best constant prediction. This loss measures what the depth
    metric does, the error left after the best per-image scale and shift,
    and rewards coarse structure from the first iterations. The demo trains
    its from-scratch depth model with it.

    Args:
        reduction: ``'mean'``, ``'sum'`` or ``'none'`` over images.
        loss_weight: Multiplier of the loss. Defaults to 1.0.
        eps: Validity threshold of the target. Defaults to 1e-6.
        loss_name: Name in the log; must start with ``loss_`` to be
            back-propagated. Defaults to ``'loss_ssi'``.
    """

    def __init__(self,
                 reduction: Literal['mean', 'sum', 'none'] = 'mean',
                 loss_weight: float = 1.0,
                 eps: float = 1e-6,
                 loss_name: str = 'loss_ssi') -> None:
        super().__init__()
        self.check_reduction(reduction)
        self.reduction = reduction
        self.loss_weight = loss_weight
        self.eps = eps
        self._loss_name = loss_name

    @property
    def loss_name(self) -> str:
        """Name of the loss in the log."""
        return self._loss_name

    def per_image(self, pred: Tensor, target: Tensor) -> Tensor:
        """(N, ) scale-and-shift-invariant RMSE of each image."""
        return depth_scale_shift_loss(pred, target, self.eps)
