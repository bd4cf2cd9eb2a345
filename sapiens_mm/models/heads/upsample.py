"""The upsampling stacks shared by every Sapiens dense head.

Each block is ``[Conv(Transpose)2d, Norm, SiLU]``, so the learnable layers sit
at Sequential indices 0, 3, 6, ... exactly as in the official checkpoints
(``deconv_layers.{0,3,...}``, ``conv_layers.{0,3,...}``). The norm is
``InstanceNorm2d(affine=False)`` (no keys) or, for the Sapiens2 albedo head,
:class:`RMSNorm2d` (key ``<i>.norm.weight``). Sapiens2's normal, pointmap and
albedo heads upsample with :func:`make_pixel_shuffle_stack` instead of
deconvolutions.
"""
from typing import Literal, Sequence

import torch
import torch.nn as nn

from ..layers import RMSNorm

__all__ = [
    'RMSNorm2d', 'make_norm', 'make_deconv_stack', 'make_conv_stack',
    'make_pixel_shuffle_stack', 'init_upsample_stack'
]

Norm = Literal['instance', 'rms']


class RMSNorm2d(nn.Module):
    """RMSNorm over the channels of a (B, C, H, W) map (Sapiens2 albedo).

    Each pixel's C-vector is divided by its root mean square (plus ``eps``)
    and scaled by a learned per-channel weight: ``nn.RMSNorm`` applied in
    channels-last layout. State-dict key: ``norm.weight`` (C).

    Args:
        channels: Number of channels C.
        eps: Added to the mean square. Defaults to 1e-6 (official).
    """

    def __init__(self, channels: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.norm = RMSNorm(channels, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, C, H, W)."""
        return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


def make_norm(norm: Norm, channels: int) -> nn.Module:
    """``InstanceNorm2d(affine=False)`` for ``'instance'``, else
    :class:`RMSNorm2d`."""
    if norm == 'instance':
        return nn.InstanceNorm2d(channels, affine=False)
    if norm == 'rms':
        return RMSNorm2d(channels)
    raise ValueError(f"norm must be 'instance' or 'rms', got {norm!r}.")

# kernel size -> (padding, output_padding) that doubles H and W at stride 2
_DECONV_PADDING = {4: (1, 0), 3: (1, 1), 2: (0, 0)}


def _check(out_channels: Sequence[int], kernel_sizes: Sequence[int],
           what: str) -> None:
    if len(out_channels) != len(kernel_sizes):
        raise ValueError(f'{what}: got {len(out_channels)} out_channels but '
                         f'{len(kernel_sizes)} kernel_sizes; give one kernel '
                         'size per layer.')


def make_deconv_stack(in_channels: int, out_channels: Sequence[int],
                      kernel_sizes: Sequence[int]) -> nn.Module:
    """Stride-2 transposed convolutions (no bias), each + IN + SiLU.

    Every block doubles the spatial size. Returns ``nn.Identity`` when
    ``out_channels`` is empty.

    Args:
        in_channels: Input channels.
        out_channels: Output channels of each deconvolution.
        kernel_sizes: Kernel size of each deconvolution (2, 3 or 4).
    """
    _check(out_channels, kernel_sizes, 'deconv layers')
    if not out_channels:
        return nn.Identity()
    layers = []
    for channels, k in zip(out_channels, kernel_sizes):
        if k not in _DECONV_PADDING:
            raise ValueError(f'Unsupported deconv kernel size {k}; use one '
                             f'of {sorted(_DECONV_PADDING)}.')
        padding, output_padding = _DECONV_PADDING[k]
        layers += [
            nn.ConvTranspose2d(in_channels, channels, k, stride=2,
                               padding=padding, output_padding=output_padding,
                               bias=False),
            nn.InstanceNorm2d(channels, affine=False),
            nn.SiLU(inplace=True),
        ]
        in_channels = channels
    return nn.Sequential(*layers)


def make_conv_stack(in_channels: int, out_channels: Sequence[int],
                    kernel_sizes: Sequence[int], norm: Norm = 'instance',
                    stride: int = 1) -> nn.Module:
    """Convolutions (with bias, padding ``(k - 1) // 2``), each + norm +
    SiLU.

    Returns ``nn.Identity`` when ``out_channels`` is empty.

    Args:
        in_channels: Input channels.
        out_channels: Output channels of each convolution.
        kernel_sizes: Kernel size of each convolution.
        norm: ``'instance'`` (default) or ``'rms'`` (:class:`RMSNorm2d`).
        stride: Stride of every convolution. Defaults to 1 (same size).
    """
    _check(out_channels, kernel_sizes, 'conv layers')
    if not out_channels:
        return nn.Identity()
    layers = []
    for channels, k in zip(out_channels, kernel_sizes):
        layers += [
            nn.Conv2d(in_channels, channels, k, stride=stride,
                      padding=(k - 1) // 2),
            make_norm(norm, channels),
            nn.SiLU(inplace=True),
        ]
        in_channels = channels
    return nn.Sequential(*layers)


def make_pixel_shuffle_stack(in_channels: int, out_channels: Sequence[int],
                             norm: Norm = 'instance') -> nn.ModuleList:
    """Sapiens2 upsampling blocks, each doubling H and W.

    Block ``j`` is ``[Conv2d(3x3, c_in -> 4 * u_j, bias), PixelShuffle(2),
    norm(u_j), SiLU]``: keys ``<j>.0.weight|bias`` (and ``<j>.2.norm.weight``
    with ``norm='rms'``), as in the official ``upsample_blocks``.

    Args:
        in_channels: Input channels.
        out_channels: Channels ``u_j`` after each block.
        norm: ``'instance'`` (default) or ``'rms'``.

    Returns:
        One ``nn.Sequential`` per block.
    """
    blocks = nn.ModuleList()
    for channels in out_channels:
        blocks.append(
            nn.Sequential(
                nn.Conv2d(in_channels, 4 * channels, 3, padding=1),
                nn.PixelShuffle(2),
                make_norm(norm, channels),
                nn.SiLU(inplace=True),
            ))
        in_channels = channels
    return blocks


def init_upsample_stack(module: nn.Module, std: float = 0.001) -> None:
    """Official (v1) init: Normal(0, std) weights and zero bias for every
    (transposed) convolution and linear layer in ``module``."""
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear)):
            nn.init.normal_(m.weight, 0, std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
