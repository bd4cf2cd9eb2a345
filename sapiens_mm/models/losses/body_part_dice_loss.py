"""Dice loss of the Sapiens2 body-part segmentation models."""
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmseg.registry import MODELS
from torch import Tensor

__all__ = ['BodyPartDiceLoss']


@MODELS.register_module()
class BodyPartDiceLoss(nn.Module):
    """Soft Dice loss averaged over the classes present in each image.

    For an image, with ``p`` the softmax of the logits and ``g`` the one-hot
    label over the pixels that are not ``ignore_index``, class ``c`` has
    ``dice_c = 2 sum(p_c g_c) / (sum(p_c^2) + sum(g_c^2) + 2 eps)``. The
    image's loss is the mean of ``1 - dice_c`` over the classes present in
    its label (the background class excluded with
    ``exclude_background=True``), 0 if none is; the batch loss is the mean
    over images. This is the official Sapiens2 ``DiceLoss`` (squared
    denominator, eps 1e-3, background excluded); mmseg's ``DiceLoss``
    instead pools all classes of an image into one ratio.

    Args:
        loss_weight: Multiplier. Defaults to 1.0.
        eps: Added to each of the two denominator sums. Defaults to 1e-3.
        exclude_background: Leave class 0 out. Defaults to True.
        ignore_index: Label of pixels left out. Defaults to 255.
        loss_name: Name in the log. Defaults to ``'loss_dice'``.
    """

    def __init__(self,
                 loss_weight: float = 1.0,
                 eps: float = 1e-3,
                 exclude_background: bool = True,
                 ignore_index: int = 255,
                 loss_name: str = 'loss_dice') -> None:
        super().__init__()
        self.loss_weight = loss_weight
        self.eps = eps
        self.exclude_background = exclude_background
        self.ignore_index = ignore_index
        self._loss_name = loss_name

    def forward(self,
                pred: Tensor,
                target: Tensor,
                weight: Optional[Tensor] = None,
                ignore_index: Optional[int] = None,
                **kwargs) -> Tensor:
        """Compute the loss.

        Args:
            pred: (N, C, H, W) logits.
            target: (N, H, W) class ids, ``ignore_index`` where unlabelled.
            weight: Unused (accepted for mmseg's decode-head call).
            ignore_index: Overrides the constructor's ``ignore_index``.

        Returns:
            Scalar loss.
        """
        if pred.ndim != 4 or target.shape != (pred.shape[0],
                                              *pred.shape[2:]):
            raise ValueError(
                f'Expected (N, C, H, W) logits and (N, H, W) labels, got '
                f'{tuple(pred.shape)} and {tuple(target.shape)}.')
        ignore = self.ignore_index if ignore_index is None else ignore_index
        num_classes = pred.shape[1]
        valid = (target != ignore) & (target >= 0) & (target < num_classes)
        prob = F.softmax(pred, dim=1) * valid[:, None]
        onehot = F.one_hot(torch.where(valid, target, 0).long(),
                           num_classes).permute(0, 3, 1, 2).to(prob)
        onehot = onehot * valid[:, None]
        inter = (prob * onehot).flatten(2).sum(-1)
        denom = (prob * prob).flatten(2).sum(-1) + onehot.flatten(2).sum(-1)
        dice = 2 * inter / (denom + 2 * self.eps)
        present = onehot.flatten(2).sum(-1) > 0
        if self.exclude_background:
            present[:, 0] = False
        per_image = ((1 - dice) * present).sum(1) / present.sum(1).clamp(
            min=1)
        return self.loss_weight * per_image.mean()

    @property
    def loss_name(self) -> str:
        """Name of the loss item in the log (``loss_`` prefix = trained)."""
        return self._loss_name
