"""Losses of the Sapiens2 albedo head."""
from typing import Literal

import torch
import torch.nn as nn
from mmseg.registry import MODELS
from torch import Tensor

from .normal_grad_loss import masked_gradient_error

__all__ = ['AlbedoLoss', 'valid_albedo_mask', 'chromaticity']


def valid_albedo_mask(target: Tensor) -> Tensor:
    """(N, H, W) pixels whose (N, 3, H, W) target albedo is finite and
    non-negative in every channel (``GenerateAlbedoTarget`` writes -1 on the
    background)."""
    return (torch.isfinite(target) & (target >= 0)).all(dim=1)


def chromaticity(rgb: Tensor, eps: float = 1e-3) -> Tensor:
    """``(rgb + eps) / (r + g + b + 3 eps)`` over dim 1, negative values
    clamped to 0 first: the colour with the intensity removed (black maps to
    grey (1/3, 1/3, 1/3)).

    Args:
        rgb: (N, 3, H, W).
        eps: Keeps the ratio (and its gradient) finite for black pixels.
    """
    rgb = rgb.clamp(min=0) + eps
    return rgb / rgb.sum(dim=1, keepdim=True)


@MODELS.register_module()
class AlbedoLoss(nn.Module):
    """One of the official albedo loss terms, on valid target pixels.

    * ``term='l1'``: ``sum_c |pred - target|`` averaged over valid pixels;
    * ``term='grad'``: L1 error of the horizontal and vertical finite
      differences (:func:`masked_gradient_error`);
    * ``term='chromaticity'``: L1 between the :func:`chromaticity` of
      prediction and target.

    The official configs use l1 (weight 2), grad (2) and chromaticity (1).
    Without a valid pixel the loss is 0 with a zero gradient.

    Args:
        term: ``'l1'``, ``'grad'`` or ``'chromaticity'``.
        loss_weight: Multiplier. Defaults to 1.0.
        loss_name: Name in the log. Defaults to ``'loss_albedo_<term>'``.
    """

    TERMS = ('l1', 'grad', 'chromaticity')

    def __init__(self,
                 term: Literal['l1', 'grad', 'chromaticity'] = 'l1',
                 loss_weight: float = 1.0,
                 loss_name: str = '') -> None:
        super().__init__()
        if term not in self.TERMS:
            raise ValueError(f'term must be one of {self.TERMS}, got '
                             f'{term!r}.')
        self.term = term
        self.loss_weight = loss_weight
        self._loss_name = loss_name or f'loss_albedo_{term}'

    def forward(self, pred: Tensor, target: Tensor, **kwargs) -> Tensor:
        """Compute the loss.

        Args:
            pred: (N, 3, H, W) predicted albedo.
            target: (N, 3, H, W) target albedo in [0, 1], negative where
                invalid.

        Returns:
            Scalar loss.
        """
        if pred.shape != target.shape or pred.ndim != 4 or \
                pred.shape[1] != 3:
            raise ValueError(
                f'Expected pred and target of the same (N, 3, H, W) shape, '
                f'got {tuple(pred.shape)} and {tuple(target.shape)}.')
        valid = valid_albedo_mask(target)
        if not valid.any():
            return pred.sum() * 0.0
        clean = torch.where(valid[:, None], target, torch.zeros_like(target))
        if self.term == 'grad':
            loss = masked_gradient_error(pred, clean, valid, squared=False)
        else:
            if self.term == 'chromaticity':
                pred, clean = chromaticity(pred), chromaticity(clean)
            loss = (pred - clean).abs().sum(dim=1)[valid].mean()
        return self.loss_weight * loss

    @property
    def loss_name(self) -> str:
        """Name of the loss item in the log (``loss_`` prefix = trained)."""
        return self._loss_name
