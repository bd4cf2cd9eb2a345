"""MAE reconstructions as pictures: original | masked | reconstruction.

Used by :class:`sapiens_mm.engine.hooks.MAEReconstructionHook` during
training and by ``tools/mae_visualize.py`` on a trained checkpoint. Works
with any mmpretrain ``MAE``-style model (``backbone`` returning
``(latent, mask, ids_restore)``, ``neck`` decoding them to per-patch pixels,
``head`` with ``patch_size`` / ``norm_pix``) and its
``SelfSupDataPreprocessor``.
"""
from typing import Dict, List, Optional, Sequence

import cv2
import numpy as np
import torch
import torch.nn as nn

__all__ = [
    'patchify', 'unpatchify', 'mae_reconstruct', 'to_uint8_images',
    'make_reconstruction_grid', 'prepare_images', 'reconstruction_grid'
]


def patchify(imgs: torch.Tensor, patch_size: int) -> torch.Tensor:
    """(B, C, H, W) -> (B, H/p * W/p, p * p * C), patches in row-major order
    and the values of one patch ordered (row, column, channel), as
    mmpretrain's ``MAEPretrainHead.patchify``."""
    B, C, H, W = imgs.shape
    p = patch_size
    if H % p or W % p:
        raise ValueError(f'Image size {(H, W)} is not a multiple of the patch'
                         f' size {p}.')
    x = imgs.reshape(B, C, H // p, p, W // p, p)
    x = torch.einsum('nchpwq->nhwpqc', x)
    return x.reshape(B, (H // p) * (W // p), p * p * C)


def unpatchify(x: torch.Tensor, patch_size: int, grid: Sequence[int],
               channels: int = 3) -> torch.Tensor:
    """Inverse of :func:`patchify`: (B, h*w, p*p*C) -> (B, C, h*p, w*p)."""
    B = x.shape[0]
    h, w = grid
    p = patch_size
    x = x.reshape(B, h, w, p, p, channels)
    x = torch.einsum('nhwpqc->nchpwq', x)
    return x.reshape(B, channels, h * p, w * p)


def _unwrap(model: nn.Module) -> nn.Module:
    return model.module if hasattr(model, 'module') else model


@torch.no_grad()
def mae_reconstruct(model: nn.Module,
                    inputs: torch.Tensor,
                    mask_ratio: Optional[float] = None,
                    paste_visible: bool = True) -> Dict[str, torch.Tensor]:
    """Mask the images, run the MAE, and turn its prediction into images.

    The model runs in eval mode (its mode is restored afterwards). With a
    ``norm_pix`` head the prediction is per-patch normalised; it is mapped
    back to pixels with the mean and std of the *original* patch (the
    target's statistics), the usual way to display such models.

    Args:
        model: An mmpretrain ``MAE`` (optionally DDP-wrapped).
        inputs: (B, 3, S, S) images, already normalised by the model's data
            preprocessor.
        mask_ratio: Override the backbone's mask ratio for this call.
        paste_visible: Show the original pixels on the visible patches of
            the reconstruction (as in the MAE paper figures). False shows the
            raw prediction everywhere.

    Returns:
        dict of (B, 3, S, S) tensors in the normalised space: ``original``,
        ``masked`` (masked patches set to 0, i.e. the dataset mean colour),
        ``reconstruction``; and ``mask`` (B, 1, S, S), 1 = masked.
    """
    model = _unwrap(model)
    backbone, neck, head = model.backbone, model.neck, model.head
    p = head.patch_size
    old_ratio = backbone.mask_ratio
    was_training = model.training
    model.eval()
    try:
        if mask_ratio is not None:
            backbone.mask_ratio = mask_ratio
        latent, mask, ids_restore = backbone(inputs)
        pred = neck(latent, ids_restore)
    finally:
        backbone.mask_ratio = old_ratio
        model.train(was_training)
    pred = pred.float()
    if getattr(head, 'norm_pix', False):
        target = patchify(inputs.float(), p)
        mean = target.mean(dim=-1, keepdim=True)
        var = target.var(dim=-1, keepdim=True)
        pred = pred * (var + 1.e-6)**.5 + mean
    S = inputs.shape[-1]
    grid = (inputs.shape[-2] // p, S // p)
    pred_img = unpatchify(pred, p, grid, inputs.shape[1])
    mask_img = unpatchify(
        mask.float().unsqueeze(-1).expand(-1, -1, p * p * inputs.shape[1]), p,
        grid, inputs.shape[1])[:, :1]
    original = inputs.float()
    masked = original * (1 - mask_img)
    recon = original * (1 - mask_img) + pred_img * mask_img \
        if paste_visible else pred_img
    return dict(
        original=original, masked=masked, reconstruction=recon, mask=mask_img)


def to_uint8_images(x: torch.Tensor, mean: torch.Tensor,
                    std: torch.Tensor) -> np.ndarray:
    """Undo the data preprocessor normalisation.

    Args:
        x: (B, 3, H, W) normalised images.
        mean, std: Per-channel statistics, any shape that broadcasts to
            (3, 1, 1).

    Returns:
        (B, H, W, 3) uint8 images in the channel order of ``x``.
    """
    mean = mean.reshape(1, -1, 1, 1).to(x)
    std = std.reshape(1, -1, 1, 1).to(x)
    img = (x * std + mean).clamp(0, 255).round().byte()
    return img.permute(0, 2, 3, 1).cpu().numpy()


def make_reconstruction_grid(columns: Sequence[np.ndarray],
                             gap: int = 4,
                             fill: int = 255) -> np.ndarray:
    """Tile images: one row per sample, one column per entry of ``columns``.

    Args:
        columns: Arrays of shape (B, H, W, 3), e.g. original, masked,
            reconstruction.
        gap: Pixels between tiles. Defaults to 4.
        fill: Value of the gap pixels. Defaults to 255 (white).

    Returns:
        (B*H + (B-1)*gap, K*W + (K-1)*gap, 3) uint8 image.
    """
    B, H, W, C = columns[0].shape
    K = len(columns)
    out = np.full((B * H + (B - 1) * gap, K * W + (K - 1) * gap, C), fill,
                  np.uint8)
    for k, col in enumerate(columns):
        for b in range(B):
            y, x = b * (H + gap), k * (W + gap)
            out[y:y + H, x:x + W] = col[b]
    return out


def reconstruction_grid(model: nn.Module,
                        inputs: torch.Tensor,
                        mask_ratio: Optional[float] = None,
                        paste_visible: bool = True) -> np.ndarray:
    """Reconstruct normalised ``inputs`` and tile original | masked |
    reconstruction (see :func:`mae_reconstruct` for the arguments).

    Returns:
        (H, W, 3) uint8 RGB image, one row per input image.
    """
    pre = _unwrap(model).data_preprocessor
    out = mae_reconstruct(model, inputs, mask_ratio, paste_visible)
    cols = [
        to_uint8_images(out[k], pre.mean, pre.std)
        for k in ('original', 'masked', 'reconstruction')
    ]
    grid = make_reconstruction_grid(cols)
    # The preprocessor turns the BGR-decoded images into RGB when it has a
    # channel conversion (Sapiens: to_rgb=True); otherwise they stay BGR.
    if not getattr(pre, '_channel_conversion', True):
        grid = np.ascontiguousarray(grid[..., ::-1])
    return grid


def prepare_images(model: nn.Module,
                   images: List[np.ndarray]) -> torch.Tensor:
    """Resize (shorter side) and centre-crop BGR images to the model's square
    input size, then normalise them like the model's data preprocessor.

    Args:
        model: An mmpretrain ``MAE`` with ``SelfSupDataPreprocessor``.
        images: (H, W, 3) uint8 BGR images.

    Returns:
        (B, 3, S, S) float tensor on the model's device.
    """
    model = _unwrap(model)
    backbone = model.backbone
    size = backbone.patch_resolution[0] * backbone.patch_embed.projection\
        .kernel_size[0]
    batch = []
    for img in images:
        h, w = img.shape[:2]
        scale = size / min(h, w)
        nh, nw = max(size, round(h * scale)), max(size, round(w * scale))
        img = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_AREA
                         if scale < 1 else cv2.INTER_CUBIC)
        y, x = (nh - size) // 2, (nw - size) // 2
        batch.append(img[y:y + size, x:x + size])
    data = torch.from_numpy(np.stack(batch)).permute(0, 3, 1, 2).contiguous()
    return model.data_preprocessor(
        dict(inputs=data, data_samples=None), False)['inputs']
