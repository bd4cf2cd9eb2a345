"""Cosine (angular) loss for Sapiens surface normals."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from mmseg.registry import MODELS
from torch import Tensor

__all__ = ['NormalCosineLoss', 'check_normal_shapes', 'valid_normal_mask']


def valid_normal_mask(target: Tensor, eps: float = 1e-6) -> Tensor:
    """Pixels with a usable ground-truth normal.

    Args:
        target: (N, 3, H, W) target normals; the background is the zero
            vector (see ``GenerateNormalTarget``).
        eps: Minimum vector length of a valid normal.

    Returns:
        (N, H, W) bool mask: finite and longer than ``eps``.
    """
    finite = torch.isfinite(target).all(dim=1)
    length = torch.nan_to_num(target).norm(dim=1)
    return finite & (length > eps)


def check_normal_shapes(pred: Tensor, target: Tensor) -> None:
    """Check that ``pred`` and ``target`` are both (N, 3, H, W).

    Raises:
        ValueError: They are not.
    """
    if pred.shape != target.shape or pred.ndim != 4 or pred.shape[1] != 3:
        raise ValueError(
            f'Expected pred and target of the same (N, 3, H, W) shape, got '
            f'{tuple(pred.shape)} and {tuple(target.shape)}; resize the '
            'prediction to the target first.')


@MODELS.register_module()
class NormalCosineLoss(nn.Module):
    """``1 - cos(pred, target)`` averaged over valid pixels.

    Both vectors are L2-normalised before the dot product, so only the
    direction of the prediction is penalised (the official
    ``CosineSimilarityLoss``). The mean runs over every valid pixel of the
    batch; with no valid pixel the loss is 0 (with a zero gradient), not NaN.

    Args:
        loss_weight: Multiplier of the loss. Defaults to 1.0.
        eps: Minimum length of a valid target normal. Defaults to 1e-6.
        loss_name: Name in the log. Defaults to ``'loss_cos'``.
    """

    def __init__(self,
                 loss_weight: float = 1.0,
                 eps: float = 1e-6,
                 loss_name: str = 'loss_cos') -> None:
        super().__init__()
        self.loss_weight = loss_weight
        self.eps = eps
        self._loss_name = loss_name

    def forward(self, pred: Tensor, target: Tensor, **kwargs) -> Tensor:
        """Compute the loss.

        Args:
            pred: (N, 3, H, W) predicted normals (any length).
            target: (N, 3, H, W) target normals, zero vector where invalid.

        Returns:
            Scalar loss.
        """
        check_normal_shapes(pred, target)
        valid = valid_normal_mask(target, self.eps)
        if not valid.any():
            return pred.sum() * 0.0
        p = F.normalize(pred.permute(0, 2, 3, 1)[valid], dim=-1, eps=1e-12)
        t = F.normalize(target.permute(0, 2, 3, 1)[valid], dim=-1)
        loss = (1.0 - (p * t).sum(dim=-1)).mean()
        return self.loss_weight * loss

    @property
    def loss_name(self) -> str:
        """Name of the loss item in the log (``loss_`` prefix = trained)."""
        return self._loss_name
