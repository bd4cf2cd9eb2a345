"""Losses of the Sapiens2 matting head.

The official matting training losses are not public. These are the four
terms the matting literature trains foreground + alpha predictors with, each
aimed at a different failure:

* ``alpha_l1``: L1 of alpha, the quantity every matting metric scores (SAD
  is its sum); L1 rather than L2 keeps hair-level errors from being
  drowned by a few large ones (Deep Image Matting, Xu et al. 2017).
* ``laplacian``: L1 between the Laplacian pyramids of predicted and target
  alpha, weighted 2^level: it scores edges and structure at every scale,
  which a per-pixel loss barely sees on thin hair (Hou & Liu 2019; FBA
  matting, Forte & Pitie 2020).
* ``composition``: L1 between the input image and the prediction
  composited onto the true background, ``F_pre + (1 - alpha) B``: it ties
  alpha and foreground to the pixels actually observed (Xu et al. 2017),
  and is the quantity users see when they composite.
* ``foreground``: L1 of the pre-multiplied foreground, ``alpha F``, against
  the target's; without a foreground file the image itself is the target
  where alpha is exactly 0 or 1 (there ``alpha F = alpha I``), so
  portrait sets with alpha only (P3M-10k, AM-2k) still train it.

All terms read the packed target of
:class:`~sapiens_mm.datasets.transforms.GenerateMattingTarget`.
"""
from typing import Literal

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmseg.registry import MODELS
from torch import Tensor

__all__ = ['MattingLoss', 'laplacian_pyramid', 'split_matting_target']


def split_matting_target(target: Tensor):
    """Split a packed (N, 10, H, W) matting target.

    Returns:
        ``(alpha, image, fg, bg)``: (N, 1, H, W) alpha (negative where
        invalid), (N, 3, H, W) image RGB, foreground RGB and background RGB
        in [0, 1] (foreground / background negative where the sample has
        none).
    """
    return target[:, :1], target[:, 1:4], target[:, 4:7], target[:, 7:10]


def _blur5(x: Tensor) -> Tensor:
    """Separable 5-tap binomial blur (1 4 6 4 1)/16, reflecting borders."""
    k = x.new_tensor([1.0, 4.0, 6.0, 4.0, 1.0]) / 16.0
    c = x.shape[1]
    x = F.pad(x, (2, 2, 2, 2), mode='reflect' if min(x.shape[-2:]) > 2
              else 'replicate')
    x = F.conv2d(x, k.view(1, 1, 1, 5).expand(c, 1, 1, 5), groups=c)
    return F.conv2d(x, k.view(1, 1, 5, 1).expand(c, 1, 5, 1), groups=c)


def laplacian_pyramid(x: Tensor, levels: int = 5) -> list:
    """Laplacian pyramid of (N, C, H, W) ``x``: ``levels - 1`` band-pass
    images (each ``g - up(down(g))`` with ``down`` = 5-tap blur then every
    second pixel, ``up`` = bilinear) and the last low-pass image."""
    pyramid = []
    current = x
    for _ in range(levels - 1):
        if min(current.shape[-2:]) < 4:
            break
        down = _blur5(current)[..., ::2, ::2]
        up = F.interpolate(down, size=current.shape[-2:], mode='bilinear',
                           align_corners=False)
        pyramid.append(current - up)
        current = down
    pyramid.append(current)
    return pyramid


@MODELS.register_module()
class MattingLoss(nn.Module):
    """One matting loss term (see the module docstring for why each).

    With ``pred`` = (N, 4, H, W) (pre-multiplied foreground RGB, alpha) and
    the packed target (alpha a, image I, foreground F, background B):

    * ``'alpha_l1'``: mean ``|alpha - a|`` over pixels with a valid a;
    * ``'laplacian'``: ``sum_l 2^l mean|L_l(alpha) - L_l(a)|`` over a
      5-level Laplacian pyramid (invalid pixels set to 0 in both);
    * ``'composition'``: mean over valid pixels of samples with a
      background of ``sum_c |F_pre + (1 - alpha) B - I| / 3``;
    * ``'foreground'``: mean ``sum_c |F_pre - a F| / 3`` over valid pixels
      of samples with a foreground; for the others over pixels with a in
      {0, 1}, against ``a I``.

    A term with no pixel to score is 0 with a zero gradient.

    Args:
        term: ``'alpha_l1'``, ``'laplacian'``, ``'composition'`` or
            ``'foreground'``.
        loss_weight: Multiplier. Defaults to 1.0.
        levels: Pyramid levels of ``'laplacian'``. Defaults to 5.
        loss_name: Name in the log. Defaults to ``'loss_matting_<term>'``.
    """

    TERMS = ('alpha_l1', 'laplacian', 'composition', 'foreground')

    def __init__(self,
                 term: Literal['alpha_l1', 'laplacian', 'composition',
                               'foreground'] = 'alpha_l1',
                 loss_weight: float = 1.0,
                 levels: int = 5,
                 loss_name: str = '') -> None:
        super().__init__()
        if term not in self.TERMS:
            raise ValueError(f'term must be one of {self.TERMS}, got '
                             f'{term!r}.')
        if levels < 1:
            raise ValueError(f'levels must be >= 1, got {levels}.')
        self.term = term
        self.loss_weight = loss_weight
        self.levels = levels
        self._loss_name = loss_name or f'loss_matting_{term}'

    def forward(self, pred: Tensor, target: Tensor, **kwargs) -> Tensor:
        """Compute the term.

        Args:
            pred: (N, 4, H, W) prediction in [0, 1].
            target: (N, 10, H, W) packed target.

        Returns:
            Scalar loss.
        """
        if pred.ndim != 4 or pred.shape[1] != 4 or target.ndim != 4 or \
                target.shape[1] != 10 or pred.shape[-2:] != \
                target.shape[-2:] or pred.shape[0] != target.shape[0]:
            raise ValueError(
                'Expected pred (N, 4, H, W) and a packed target (N, 10, H, '
                f'W), got {tuple(pred.shape)} and {tuple(target.shape)}.')
        fg_pre, alpha = pred[:, :3], pred[:, 3:]
        gt_alpha, image, gt_fg, gt_bg = split_matting_target(target)
        valid = (gt_alpha >= 0) & torch.isfinite(gt_alpha)
        clean_alpha = torch.where(valid, gt_alpha, torch.zeros_like(gt_alpha))
        if self.term == 'alpha_l1':
            loss = _masked_mean((alpha - clean_alpha).abs(), valid)
        elif self.term == 'laplacian':
            vf = valid.to(alpha.dtype)
            loss = alpha.sum() * 0.0
            pairs = zip(laplacian_pyramid(alpha * vf, self.levels),
                        laplacian_pyramid(clean_alpha * vf, self.levels))
            for level, (lp, lg) in enumerate(pairs):
                loss = loss + (2**level) * (lp - lg).abs().mean()
        elif self.term == 'composition':
            has_bg = (gt_bg >= 0).all(dim=1, keepdim=True)
            mask = valid & has_bg
            comp = fg_pre + (1.0 - alpha) * gt_bg.clamp(min=0)
            loss = _masked_mean((comp - image).abs().mean(1, keepdim=True),
                                mask)
        else:
            has_fg = (gt_fg >= 0).all(dim=1, keepdim=True)
            binary = (clean_alpha == 0) | (clean_alpha == 1)
            mask = valid & (has_fg | binary)
            target_pre = clean_alpha * torch.where(has_fg, gt_fg, image)
            loss = _masked_mean(
                (fg_pre - target_pre).abs().mean(1, keepdim=True), mask)
        return self.loss_weight * loss

    @property
    def loss_name(self) -> str:
        """Name of the loss item in the log (``loss_`` prefix = trained)."""
        return self._loss_name


def _masked_mean(values: Tensor, mask: Tensor) -> Tensor:
    """Mean of (N, 1, H, W) ``values`` over ``mask``; 0 (with a zero
    gradient) when the mask is empty."""
    if not mask.any():
        return values.sum() * 0.0
    return values[mask].mean()
