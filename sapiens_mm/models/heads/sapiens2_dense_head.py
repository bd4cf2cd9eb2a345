"""Sapiens2 dense regression head: PixelShuffle upsampling to full size."""
import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import torch.nn as nn
from mmseg.models.decode_heads.decode_head import BaseDecodeHead
from mmseg.registry import MODELS
from mmseg.utils import ConfigType, OptConfigType
from torch import Tensor

from .sapiens_depth_head import SapiensDepthHead
from .upsample import (Norm, init_upsample_stack, make_conv_stack,
                       make_pixel_shuffle_stack)

__all__ = ['Sapiens2DenseHead']


@MODELS.register_module()
class Sapiens2DenseHead(SapiensDepthHead):
    """Trunk shared by the Sapiens2 normal, pointmap and albedo heads.

    Layout (official ``NormalHead``)::

        input_conv       3x3 conv C -> C (bias), norm, SiLU
        upsample_blocks  per u_j: 3x3 conv -> 4 u_j (bias), PixelShuffle(2),
                         norm, SiLU                      (each doubles H, W)
        conv_layers      3x3 convs (bias), each + norm + SiLU
        <final_layer>    1x1 conv -> out_channels, no activation

    The norm is ``InstanceNorm2d(affine=False)`` (no keys), or
    :class:`~sapiens_mm.models.heads.upsample.RMSNorm2d` with
    ``norm='rms'`` (albedo). With four upsampling blocks a (B, C, 64, 48)
    feature map becomes a (B, out_channels, 1024, 768) map. State-dict keys:
    ``input_conv.0``, ``upsample_blocks.{j}.0``, ``conv_layers.{0,3,6}`` and
    the final layer (``conv_normal``, ``conv_pointmap``, ``conv_albedo``...,
    set by ``final_layer_name``). There is no dropout and no ``conv_seg``.

    Training is :class:`SapiensDepthHead`'s: the prediction is resized
    bilinearly to the target (``target_key``) and every loss in
    ``loss_decode`` is summed by name.

    Args:
        in_channels: Backbone channels (``embed_dims``).
        upsample_channels: Channels u_j of each upsampling block. Defaults to
            (768, 512, 256, 128) (the 0.4b / 0.8b / 1b normal head).
        conv_out_channels: Channels of each 3x3 convolution. Defaults to
            (64, 32, 16).
        conv_kernel_sizes: Kernel of each convolution. Defaults to 3 for
            every layer.
        out_channels: Output channels. Defaults to 3.
        norm: ``'instance'`` (default) or ``'rms'``.
        final_layer_name: Attribute (and key prefix) of the output
            convolution. Defaults to ``'conv_out'``.
        loss_decode: Loss config(s), called as ``loss(pred, target)``.
        target_key: Data-sample field of the target.
        align_corners: Of the bilinear resizes. Defaults to False.
        init_cfg: Init of the output convolution. Defaults to Normal(0,
            0.01) (mmseg's ``conv_seg`` init); the trunk gets Normal(0,
            0.001) weights and zero biases when built.
        **kwargs: Other ``BaseDecodeHead`` options (``in_index``...).
    """

    def __init__(self,
                 in_channels: int,
                 upsample_channels: Sequence[int] = (768, 512, 256, 128),
                 conv_out_channels: Sequence[int] = (64, 32, 16),
                 conv_kernel_sizes: Optional[Sequence[int]] = None,
                 out_channels: int = 3,
                 norm: Norm = 'instance',
                 final_layer_name: str = 'conv_out',
                 loss_decode: Union[ConfigType, List[ConfigType]] = dict(
                     type='NormalL1Loss'),
                 target_key: str = 'gt_normal_map',
                 align_corners: bool = False,
                 init_cfg: OptConfigType = None,
                 **kwargs) -> None:
        if not isinstance(in_channels, int):
            raise TypeError(f'{type(self).__name__} takes one feature map: '
                            f'in_channels must be an int, got '
                            f'{in_channels!r}.')
        for key in ('num_classes', 'threshold', 'channels', 'dropout_ratio'):
            if key in kwargs:
                raise TypeError(
                    f'{type(self).__name__} has no `{key}` option (the '
                    'output width is out_channels, the input width of the '
                    'output convolution is conv_out_channels[-1], and there '
                    f'is no dropout); remove it from the config.')
        upsample_channels = tuple(upsample_channels)
        conv_out_channels = tuple(conv_out_channels)
        if not upsample_channels or not conv_out_channels:
            raise ValueError('upsample_channels and conv_out_channels need at '
                             'least one entry each.')
        if conv_kernel_sizes is None:
            conv_kernel_sizes = (3, ) * len(conv_out_channels)
        if init_cfg is None:
            init_cfg = dict(
                type='Normal', std=0.01, override=dict(name=final_layer_name))
        # BaseDecodeHead's constructor, not SapiensDepthHead's: this trunk
        # replaces the deconv stack, and conv_seg is replaced by the final
        # layer below. The loss and target handling are SapiensDepthHead's.
        BaseDecodeHead.__init__(
            self,
            in_channels,
            conv_out_channels[-1],
            num_classes=out_channels,
            out_channels=out_channels,
            threshold=0.0,  # unused: regression
            dropout_ratio=0.0,
            loss_decode=loss_decode,
            align_corners=align_corners,
            init_cfg=init_cfg,
            **kwargs)
        del self.conv_seg
        self.target_key = target_key
        self.final_layer_name = final_layer_name
        self.input_conv = make_conv_stack(in_channels, (in_channels, ), (3, ),
                                          norm)
        self.upsample_blocks = make_pixel_shuffle_stack(
            in_channels, upsample_channels, norm)
        self.conv_layers = make_conv_stack(upsample_channels[-1],
                                           conv_out_channels,
                                           tuple(conv_kernel_sizes), norm)
        self.add_module(final_layer_name,
                        nn.Conv2d(conv_out_channels[-1], out_channels, 1))
        self.upsample_factor = 2**len(upsample_channels)
        for module in (self.input_conv, self.upsample_blocks,
                       self.conv_layers):
            init_upsample_stack(module)

    @staticmethod
    def channels_of_state_dict(shapes: Mapping[str, Sequence[int]],
                               prefix: str = 'decode_head.'
                               ) -> Optional[Dict[str, Tuple[int, ...]]]:
        """The channel plan of a head stored under ``prefix``, read from
        its tensor shapes, in the official layout (``upsample_blocks.{j}.0``,
        ``conv_layers.{3k}``) or the Transformers one
        (``upsample_layers.{j}.convolution``,
        ``conv_layers.{k}.convolution``).

        Args:
            shapes: Key -> shape (a state dict's tensors work too).
            prefix: Where the head's keys start.

        Returns:
            ``dict(upsample_channels=..., conv_out_channels=...)``: the
            upsampling convolutions' rows / 4 (PixelShuffle(2) turns 4 u
            channels into u) and the 3x3 convolutions' rows; None when
            ``shapes`` holds no such head.
        """
        def rows(patterns: Sequence[str]) -> Tuple[int, ...]:
            found = {}
            for key, shape in shapes.items():
                for pattern in patterns:
                    m = re.fullmatch(re.escape(prefix) + pattern, key)
                    if m:
                        found[int(m.group(1))] = int(tuple(shape)[0])
            return tuple(found[i] for i in sorted(found))

        upsample = rows((r'upsample_blocks\.(\d+)\.0\.weight',
                         r'upsample_layers\.(\d+)\.convolution\.weight'))
        convs = rows((r'conv_layers\.(\d+)\.weight',
                      r'conv_layers\.(\d+)\.convolution\.weight'))
        if not upsample or not convs:
            return None
        return dict(upsample_channels=tuple(c // 4 for c in upsample),
                    conv_out_channels=convs)

    def init_weights(self) -> None:
        """Apply ``init_cfg`` (the trunk keeps its construction init)."""
        BaseDecodeHead.init_weights(self)

    @property
    def final_layer(self) -> nn.Conv2d:
        """The output 1x1 convolution."""
        return getattr(self, self.final_layer_name)

    def trunk(self, x: Tensor) -> Tensor:
        """(B, C, h, w) features -> (B, conv_out_channels[-1],
        h * upsample_factor, w * upsample_factor)."""
        x = self.input_conv(x)
        for block in self.upsample_blocks:
            x = block(x)
        return self.conv_layers(x)

    def forward(self, inputs: Union[Tensor, Tuple[Tensor, ...]]) -> Tensor:
        """Regress the dense map.

        Args:
            inputs: Backbone outputs; the one at ``in_index`` is
                (B, in_channels, h, w).

        Returns:
            (B, out_channels, h * upsample_factor, w * upsample_factor).
        """
        if isinstance(inputs, Tensor):
            inputs = (inputs, )
        return self.final_layer(self.trunk(self._transform_inputs(inputs)))
