"""The deconv + conv upsampling stack shared by every Sapiens dense head.

Each block is ``[Conv(Transpose)2d, InstanceNorm2d(affine=False), SiLU]``, so
the learnable layers sit at Sequential indices 0, 3, 6, ... exactly as in the
official checkpoints (``deconv_layers.{0,3,...}``, ``conv_layers.{0,3,...}``).
"""
from typing import Sequence

import torch.nn as nn

__all__ = ['make_deconv_stack', 'make_conv_stack', 'init_upsample_stack']

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
                    kernel_sizes: Sequence[int]) -> nn.Module:
    """Same-size convolutions (with bias), each + IN + SiLU.

    Returns ``nn.Identity`` when ``out_channels`` is empty.
    """
    _check(out_channels, kernel_sizes, 'conv layers')
    if not out_channels:
        return nn.Identity()
    layers = []
    for channels, k in zip(out_channels, kernel_sizes):
        layers += [
            nn.Conv2d(in_channels, channels, k, padding=(k - 1) // 2),
            nn.InstanceNorm2d(channels, affine=False),
            nn.SiLU(inplace=True),
        ]
        in_channels = channels
    return nn.Sequential(*layers)


def init_upsample_stack(module: nn.Module, std: float = 0.001) -> None:
    """Official init: Normal(0, std) weights and zero bias for every
    (transposed) convolution in ``module``."""
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.ConvTranspose2d)):
            nn.init.normal_(m.weight, 0, std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
