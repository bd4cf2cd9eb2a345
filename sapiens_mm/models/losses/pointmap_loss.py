"""The Sapiens2 pointmap loss: every official term in one module."""
from typing import Dict, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmseg.registry import MODELS
from torch import Tensor

from .depth_silog_loss import depth_silog_loss

__all__ = ['PointmapLoss', 'pointmap_normals']


def pointmap_normals(points: Tensor, valid: Tensor, eps: float = 1e-8):
    """Unit normals of a pointmap by the cross product of its differences.

    At pixel (i, j) the normal is ``normalize(dx x dy)`` with
    ``dx = P[i, j+1] - P[i, j]`` and ``dy = P[i+1, j] - P[i, j]``; for OpenCV
    camera axes (X right, Y down, Z forward) a surface facing the camera
    gets a normal with negative Z.

    Args:
        points: (N, 3, H, W) pointmap.
        valid: (N, H, W) bool mask of valid points.
        eps: Norm clamp of the normalisation.

    Returns:
        ``(normals, valid)``: (N, 3, H-1, W-1) unit normals and the
        (N, H-1, W-1) mask of pixels whose three points are valid.
    """
    p = points[:, :, :-1, :-1]
    dx = points[:, :, :-1, 1:] - p
    dy = points[:, :, 1:, :-1] - p
    normals = F.normalize(torch.cross(dx, dy, dim=1), dim=1, eps=eps)
    ok = valid[:, :-1, :-1] & valid[:, :-1, 1:] & valid[:, 1:, :-1]
    return normals, ok


def _masked_mean(values: Tensor, valid: Tensor) -> Tensor:
    """Mean of (N, H, W) ``values`` over ``valid``; 0 when nothing is."""
    if not valid.any():
        return values.sum() * 0.0
    return values[valid].mean()


def _masked_pool(x: Tensor, valid: Tensor, factor: int):
    """Mean of the valid pixels of every ``factor`` x ``factor`` cell."""
    w = valid[:, None].to(x)
    count = F.avg_pool2d(w, factor, ceil_mode=True)
    pooled = F.avg_pool2d(x * w, factor, ceil_mode=True) / count.clamp(
        min=1e-12)
    return pooled, count[:, 0] > 0


@MODELS.register_module()
class PointmapLoss(nn.Module):
    """The official Sapiens2 pointmap loss terms, logged apart.

    All terms but the scale term compare the predicted canonical pointmap
    ``P`` with the target ``G`` (the metric pointmap times the target scale
    ``s = f_c / fx``) over valid target pixels (finite, ``Z > 0``). With
    ``m`` the mean target depth of the image, ``e(A, B) = sum_c |A - B| / m``
    clamped at ``clamp``:

    ======================== ====== ==========================================
    log name                 weight term
    ======================== ====== ==========================================
    ``loss_pm_l1``           2      mean ``e(P, G)``
    ``loss_pm_multiscale``   1      ``e`` after masked mean pooling by each of
                                    ``multiscale_factors`` (2 and 4), summed
    ``loss_pm_silog``        1      SiLog loss of ``P_z`` against ``G_z``
    ``loss_pm_intrinsics``   1      ``|P_x/P_z - (u - cx)/fx|`` +
                                    ``|P_y/P_z - (v - cy)/fy|`` (clamped): the
                                    predicted rays against the pixel rays of
                                    the input camera
    ``loss_pm_shift_l1``     1      ``e`` after removing each image's mean
                                    point from ``P`` and from ``G``
    ``loss_pm_normal``       2      ``1 - cos + L1`` of the cross-product
                                    normals (:func:`pointmap_normals`)
    ``loss_pm_scale``        4      ``|s_pred - s|``
    ======================== ====== ==========================================

    Images without a fitted camera (NaN scale) are left out of the scale and
    intrinsics terms.

    Args:
        l1_weight: Weight of ``loss_pm_l1``; like every term weight below, 0
            turns the term off (it is then not logged).
        multiscale_weight: Weight of ``loss_pm_multiscale``.
        silog_weight: Weight of ``loss_pm_silog``.
        intrinsics_weight: Weight of ``loss_pm_intrinsics``.
        shift_l1_weight: Weight of ``loss_pm_shift_l1``.
        normal_weight: Weight of ``loss_pm_normal``.
        scale_weight: Weight of ``loss_pm_scale``.
        clamp: Upper clamp of the per-pixel errors. Defaults to 4.
        multiscale_factors: Pooling factors of the multiscale term.
        eps: Depth clamp of the ray and SiLog terms. Defaults to 1e-6.
    """

    def __init__(self,
                 l1_weight: float = 2.0,
                 multiscale_weight: float = 1.0,
                 silog_weight: float = 1.0,
                 intrinsics_weight: float = 1.0,
                 shift_l1_weight: float = 1.0,
                 normal_weight: float = 2.0,
                 scale_weight: float = 4.0,
                 clamp: float = 4.0,
                 multiscale_factors: Sequence[int] = (2, 4),
                 eps: float = 1e-6) -> None:
        super().__init__()
        self.weights = dict(
            l1=l1_weight, multiscale=multiscale_weight, silog=silog_weight,
            intrinsics=intrinsics_weight, shift_l1=shift_l1_weight,
            normal=normal_weight, scale=scale_weight)
        self.clamp = float(clamp)
        self.multiscale_factors = tuple(int(f) for f in multiscale_factors)
        self.eps = eps

    def _error(self, a: Tensor, b: Tensor, depth: Tensor) -> Tensor:
        """(N, H, W) clamped ``sum_c |a - b| / depth``."""
        return ((a - b).abs().sum(dim=1) / depth.view(-1, 1, 1)).clamp(
            max=self.clamp)

    def forward(self, pred: Tensor, pred_scale: Tensor, target: Tensor,
                target_scale: Tensor, intrinsics: Tensor
                ) -> Dict[str, Tensor]:
        """Compute every term with a non-zero weight.

        Args:
            pred: (N, 3, H, W) predicted canonical pointmap.
            pred_scale: (N, ) predicted scale.
            target: (N, 3, H, W) canonical target, zero where invalid.
            target_scale: (N, ) target scale ``f_c / fx`` (NaN: unknown).
            intrinsics: (N, 4) ``(fx, fy, cx, cy)`` of the input grid.

        Returns:
            ``{'loss_pm_<term>': scalar}``.
        """
        if pred.shape != target.shape or pred.ndim != 4 or \
                pred.shape[1] != 3:
            raise ValueError(
                f'Expected pred and target of the same (N, 3, H, W) shape, '
                f'got {tuple(pred.shape)} and {tuple(target.shape)}; resize '
                'the prediction to the target first.')
        valid = torch.isfinite(target).all(dim=1) & (target[:, 2] > 0)
        target = torch.where(valid[:, None], target,
                             torch.zeros_like(target))
        count = valid.flatten(1).sum(1).clamp(min=1)
        depth = (target[:, 2].flatten(1).sum(1) / count).clamp(min=self.eps)
        camera_ok = torch.isfinite(target_scale) & torch.isfinite(
            intrinsics).all(dim=1)
        w = self.weights
        losses = {}
        if w['l1']:
            losses['loss_pm_l1'] = w['l1'] * _masked_mean(
                self._error(pred, target, depth), valid)
        if w['multiscale']:
            total = pred.sum() * 0.0
            for factor in self.multiscale_factors:
                p, _ = _masked_pool(pred, valid, factor)
                g, ok = _masked_pool(target, valid, factor)
                total = total + _masked_mean(self._error(p, g, depth), ok)
            losses['loss_pm_multiscale'] = w['multiscale'] * total
        if w['silog']:
            losses['loss_pm_silog'] = w['silog'] * depth_silog_loss(
                pred[:, 2], target[:, 2], self.eps).mean()
        if w['intrinsics']:
            losses['loss_pm_intrinsics'] = w['intrinsics'] * _masked_mean(
                self._ray_error(pred, intrinsics),
                valid & camera_ok.view(-1, 1, 1))
        if w['shift_l1']:
            def centred(x):
                return x - (x * valid[:, None]).flatten(2).sum(-1).div(
                    count.view(-1, 1)).view(-1, 3, 1, 1)
            losses['loss_pm_shift_l1'] = w['shift_l1'] * _masked_mean(
                self._error(centred(pred), centred(target), depth), valid)
        if w['normal']:
            n_pred, _ = pointmap_normals(pred, valid)
            n_gt, ok = pointmap_normals(target, valid)
            err = (1 - (n_pred * n_gt).sum(dim=1)) + (n_pred -
                                                      n_gt).abs().sum(dim=1)
            losses['loss_pm_normal'] = w['normal'] * _masked_mean(err, ok)
        if w['scale']:
            diff = (pred_scale - torch.nan_to_num(target_scale)).abs()
            losses['loss_pm_scale'] = w['scale'] * (
                diff[camera_ok].mean() if camera_ok.any() else diff.sum() *
                0.0)
        return losses

    def _ray_error(self, pred: Tensor, intrinsics: Tensor) -> Tensor:
        """(N, H, W) clamped L1 between predicted and pixel rays."""
        n, _, h, w = pred.shape
        K = torch.nan_to_num(intrinsics).to(pred)
        fx, fy, cx, cy = (K[:, i].view(n, 1, 1) for i in range(4))
        v, u = torch.meshgrid(
            torch.arange(h, dtype=pred.dtype, device=pred.device),
            torch.arange(w, dtype=pred.dtype, device=pred.device),
            indexing='ij')
        z = pred[:, 2]
        z = torch.where(z.abs() < self.eps,
                        torch.full_like(z, self.eps), z)
        err = ((pred[:, 0] / z - (u - cx) / fx.clamp(min=self.eps)).abs() +
               (pred[:, 1] / z - (v - cy) / fy.clamp(min=self.eps)).abs())
        return err.clamp(max=self.clamp)
