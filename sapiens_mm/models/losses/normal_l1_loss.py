"""L1 loss for Sapiens surface normals."""
import torch.nn as nn
from mmseg.registry import MODELS
from torch import Tensor

from .normal_cosine_loss import check_normal_shapes, valid_normal_mask

__all__ = ['NormalL1Loss']


@MODELS.register_module()
class NormalL1Loss(nn.Module):
    """L1 distance between raw predicted and target normals.

    ``sum_c |pred_c - target_c|`` per pixel, averaged over the valid pixels
    of the batch (the official ``L1Loss`` divides the channel-summed error by
    the valid pixel count). The prediction is not normalised, so this term
    also pulls its length towards 1. With no valid pixel the loss is 0 (zero
    gradient), not NaN.

    Args:
        loss_weight: Multiplier of the loss. Defaults to 1.0.
        eps: Minimum length of a valid target normal. Defaults to 1e-6.
        loss_name: Name in the log. Defaults to ``'loss_l1'``.
    """

    def __init__(self,
                 loss_weight: float = 1.0,
                 eps: float = 1e-6,
                 loss_name: str = 'loss_l1') -> None:
        super().__init__()
        self.loss_weight = loss_weight
        self.eps = eps
        self._loss_name = loss_name

    def forward(self, pred: Tensor, target: Tensor, **kwargs) -> Tensor:
        """Compute the loss.

        Args:
            pred: (N, 3, H, W) predicted normals.
            target: (N, 3, H, W) target normals, zero vector where invalid.

        Returns:
            Scalar loss.
        """
        check_normal_shapes(pred, target)
        valid = valid_normal_mask(target, self.eps)
        if not valid.any():
            return pred.sum() * 0.0
        diff = (pred - target).abs().sum(dim=1)
        loss = diff[valid].mean()
        return self.loss_weight * loss

    @property
    def loss_name(self) -> str:
        """Name of the loss item in the log (``loss_`` prefix = trained)."""
        return self._loss_name
