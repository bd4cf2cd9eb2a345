"""Scale-invariant log loss for Sapiens relative depth."""
from typing import Literal, Optional

import torch
from mmseg.models.losses import SiLogLoss
from mmseg.registry import MODELS
from torch import Tensor

__all__ = ['DepthSiLogLoss', 'PerImageDepthLoss', 'depth_silog_loss',
           'sqrt_or_zero']


def depth_silog_loss(pred: Tensor,
                     target: Tensor,
                     eps: float = 1e-6,
                     variance_focus: float = 0.5) -> Tensor:
    """Per-image SiLog loss over valid pixels.

    With ``d = log(target) - log(pred)`` over the pixels where
    ``target > eps`` (both clamped at ``eps`` before the log), the loss of one
    image is ``sqrt(mean(d^2) - variance_focus * mean(d)^2)``. An image with
    no valid pixel gets exactly 0 (and a zero gradient), never NaN.

    Args:
        pred: (N, ...) predictions.
        target: (N, ...) targets, same shape; background / invalid pixels are
            ``<= eps`` (Sapiens targets use -1 on the background).
        eps: Validity threshold and log clamp. Defaults to 1e-6.
        variance_focus: The lambda in front of ``mean(d)^2``; 0.5 is the
            official value. Must lie in [0, 1] so the loss stays real.

    Returns:
        (N, ) loss of each image.
    """
    pred, target = pred.flatten(1), target.flatten(1)
    valid = (target > eps) & torch.isfinite(target)
    d = torch.log(target.clamp(min=eps)) - torch.log(pred.clamp(min=eps))
    d = torch.where(valid, d, torch.zeros_like(d))
    count = valid.sum(dim=1).clamp(min=1).to(d.dtype)
    mean_d = d.sum(dim=1) / count
    mean_d2 = d.pow(2).sum(dim=1) / count
    return sqrt_or_zero(mean_d2 - variance_focus * mean_d.pow(2))


def sqrt_or_zero(x: Tensor) -> Tensor:
    """``sqrt(x)`` where ``x > 0``, else 0, with a finite gradient.

    sqrt has an infinite slope at 0: exact zeros (an image with no valid
    pixel, or a perfect prediction) are routed around it.
    """
    positive = x > 0
    safe = torch.where(positive, x, torch.ones_like(x))
    return torch.where(positive, torch.sqrt(safe), torch.zeros_like(x))


class PerImageDepthLoss:
    """Shared ``forward`` of the depth losses: checks the shapes, takes the
    (N, ) loss of each image from ``per_image`` and weights and reduces it
    (``'mean'`` divides by ``avg_factor`` if given, else by N: images
    without a valid pixel count, as 0, as in the official loss). Expects
    ``reduction`` and ``loss_weight`` attributes."""

    @staticmethod
    def check_reduction(reduction: str) -> None:
        """Raise ``ValueError`` unless ``reduction`` is one this class
        applies."""
        if reduction not in ('mean', 'sum', 'none'):
            raise ValueError(f'reduction must be "mean", "sum" or "none", '
                             f'got {reduction!r}.')

    def per_image(self, pred: Tensor, target: Tensor) -> Tensor:
        raise NotImplementedError

    def forward(self,
                pred: Tensor,
                target: Tensor,
                weight: Optional[Tensor] = None,
                avg_factor: Optional[float] = None,
                reduction_override: Optional[str] = None,
                **kwargs) -> Tensor:
        """Compute the loss.

        Args:
            pred: (N, 1, H, W) predicted depth.
            target: (N, 1, H, W) target depth, invalid pixels ``<= eps``.
            weight: Optional (N, ) per-image weights.
            avg_factor: Optional denominator of the ``'mean'`` reduction.
            reduction_override: Overrides ``reduction`` for this call.

        Returns:
            Scalar loss, or (N, ) with ``reduction='none'``.
        """
        if pred.shape != target.shape:
            raise ValueError(
                f'pred {tuple(pred.shape)} and target {tuple(target.shape)} '
                'must have the same shape; resize the prediction to the '
                'target first.')
        loss = self.per_image(pred, target)
        if weight is not None:
            loss = loss * weight.to(loss)
        reduction = reduction_override or self.reduction
        if reduction == 'sum':
            loss = loss.sum()
        elif reduction == 'mean':
            loss = (loss.sum() / avg_factor if avg_factor is not None else
                    loss.mean())
        return self.loss_weight * loss


@MODELS.register_module()
class DepthSiLogLoss(PerImageDepthLoss, SiLogLoss):
    """SiLog loss with the Sapiens validity rule and a safe empty case.

    Same formula as mmseg's ``SiLogLoss`` (and the official Sapiens loss):
    per image ``sqrt(mean(d^2) - 0.5 * mean(d)^2)`` with
    ``d = log(target) - log(pred)`` over pixels whose target is above
    ``eps``, then reduced over the batch. Unlike the upstream version, an
    image (or a whole batch) without a valid pixel contributes 0 with a finite
    gradient instead of NaN.

    With ``reduction='mean'`` the batch mean includes images without a valid
    pixel (as 0), as the official loss does.

    Args:
        reduction: ``'mean'``, ``'sum'`` or ``'none'`` over images.
        loss_weight: Multiplier of the loss. Defaults to 1.0.
        eps: Validity threshold and log clamp. Defaults to 1e-6.
        variance_focus: Lambda of the scale-invariant term. Defaults to 0.5.
        loss_name: Name in the log; must start with ``loss_`` to be
            back-propagated. Defaults to ``'loss_silog'``.
    """

    def __init__(self,
                 reduction: Literal['mean', 'sum', 'none'] = 'mean',
                 loss_weight: float = 1.0,
                 eps: float = 1e-6,
                 variance_focus: float = 0.5,
                 loss_name: str = 'loss_silog') -> None:
        self.check_reduction(reduction)
        if not 0.0 <= variance_focus <= 1.0:
            raise ValueError(f'variance_focus must lie in [0, 1] (got '
                             f'{variance_focus}); 0.5 is the official value.')
        super().__init__(reduction=reduction, loss_weight=loss_weight,
                         eps=eps, loss_name=loss_name)
        self.variance_focus = variance_focus

    def per_image(self, pred: Tensor, target: Tensor) -> Tensor:
        """(N, ) SiLog loss of each image."""
        return depth_silog_loss(pred, target, self.eps, self.variance_focus)
