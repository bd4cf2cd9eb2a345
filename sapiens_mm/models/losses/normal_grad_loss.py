"""Finite-difference (gradient) loss for Sapiens2 surface normals."""
from mmseg.registry import MODELS
from torch import Tensor

from .normal_cosine_loss import check_normal_shapes, valid_normal_mask
from .normal_l1_loss import NormalL1Loss

__all__ = ['NormalGradLoss', 'masked_gradient_error']


def masked_gradient_error(pred: Tensor, target: Tensor, valid: Tensor,
                          squared: bool) -> Tensor:
    """Error of the horizontal and vertical finite differences.

    For the differences ``d_x = x[..., 1:] - x[..., :-1]`` (and along H),
    the per-pixel error is summed over channels, ``|d_pred - d_target|``
    or its square, and averaged over the pairs whose two pixels are both
    valid; the x and y means are added. Without a valid pair a term is 0
    (zero gradient).

    Args:
        pred: (N, C, H, W) prediction.
        target: (N, C, H, W) target.
        valid: (N, H, W) bool mask of valid target pixels.
        squared: Squared error if True, else absolute error.

    Returns:
        Scalar loss.
    """
    total = pred.sum() * 0.0
    for dim in (-1, -2):
        n = pred.shape[dim]
        if n < 2:
            continue
        d_pred = pred.narrow(dim, 1, n - 1) - pred.narrow(dim, 0, n - 1)
        d_target = (target.narrow(dim, 1, n - 1) -
                    target.narrow(dim, 0, n - 1))
        both = valid.narrow(dim, 1, n - 1) & valid.narrow(dim, 0, n - 1)
        if not both.any():
            continue
        err = d_pred - d_target
        err = (err * err if squared else err.abs()).sum(dim=1)
        total = total + err[both].mean()
    return total


@MODELS.register_module()
class NormalGradLoss(NormalL1Loss):
    """Squared error of the normal map's finite differences (official
    ``NormalGradL1Loss``, which despite its name squares the error).

    See :func:`masked_gradient_error` (``squared=True``) on the raw
    prediction, over pairs of valid target pixels.

    Args:
        loss_weight: Multiplier of the loss. Defaults to 1.0 (the official
            configs use 10).
        eps: Minimum length of a valid target normal. Defaults to 1e-6.
        loss_name: Name in the log. Defaults to ``'loss_grad'``.
    """

    def __init__(self,
                 loss_weight: float = 1.0,
                 eps: float = 1e-6,
                 loss_name: str = 'loss_grad') -> None:
        super().__init__(loss_weight=loss_weight, eps=eps,
                         loss_name=loss_name)

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
        return self.loss_weight * masked_gradient_error(
            pred, target, valid, squared=True)
