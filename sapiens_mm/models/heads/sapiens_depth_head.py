"""Sapiens dense regression head (relative depth)."""
from typing import List, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn
from mmseg.models.decode_heads.decode_head import BaseDecodeHead
from mmseg.models.utils import resize
from mmseg.registry import MODELS
from mmseg.utils import ConfigType, SampleList
from torch import Tensor

from .upsample import init_upsample_stack, make_conv_stack, make_deconv_stack

__all__ = ['SapiensDepthHead']


@MODELS.register_module()
class SapiensDepthHead(BaseDecodeHead):
    """Deconv + conv head that regresses a dense map from ViT features.

    Layout (official ``VitDepthHead``): ``deconv_layers`` (stride-2
    ConvTranspose2d, no bias, each + InstanceNorm + SiLU), ``conv_layers``
    (1x1 Conv2d + InstanceNorm + SiLU), Dropout2d, then the 1x1 ``conv_seg``
    with ``out_channels`` outputs and no activation. With the defaults a
    (B, C, 64, 48) feature map becomes a (B, 1, 1024, 768) depth map; state
    dict keys are ``deconv_layers.{0,3,6,9}.weight``,
    ``conv_layers.{0,3}.weight|bias`` and ``conv_seg.weight|bias``.

    The loss resizes the prediction bilinearly to the target size and sums
    every loss in ``loss_decode``.

    Args:
        in_channels: Backbone channels (``embed_dims``).
        channels: Input channels of ``conv_seg``; must equal the last entry
            of ``conv_out_channels`` (or of ``deconv_out_channels`` when
            there are no convs). Defaults to 384.
        deconv_out_channels: Channels of each deconvolution (each doubles H
            and W). Defaults to (384, 384, 384, 384): x16.
        deconv_kernel_sizes: Kernel of each deconvolution (2, 3 or 4).
            Defaults to 4 for every layer.
        conv_out_channels: Channels of each convolution. Defaults to
            (384, 384).
        conv_kernel_sizes: Kernel of each convolution. Defaults to 1 for
            every layer.
        out_channels: Output channels. Defaults to 1 (depth).
        dropout_ratio: Dropout2d before ``conv_seg``. Defaults to 0.1.
        loss_decode: Loss config or list of configs, summed by
            ``loss_name``. Defaults to ``DepthSiLogLoss``.
        target_key: Data-sample field holding the target. Defaults to
            ``'gt_depth_map'``.
        align_corners: ``align_corners`` of the bilinear resizes.
        init_std: Std of the normal init of the (de)conv stacks (official
            0.001), applied at construction like every Sapiens dense head
            (:class:`SapiensSegHead`, the Sapiens2 heads); ``init_weights``
            then applies ``init_cfg`` (a Pretrained init or a checkpoint
            overwrites both).
        **kwargs: Other ``BaseDecodeHead`` options (``in_index``,
            ``init_cfg``...).
    """

    def __init__(self,
                 in_channels: int,
                 channels: int = 384,
                 deconv_out_channels: Sequence[int] = (384, 384, 384, 384),
                 deconv_kernel_sizes: Optional[Sequence[int]] = None,
                 conv_out_channels: Sequence[int] = (384, 384),
                 conv_kernel_sizes: Optional[Sequence[int]] = None,
                 out_channels: int = 1,
                 dropout_ratio: float = 0.1,
                 loss_decode: Union[ConfigType, List[ConfigType]] = dict(
                     type='DepthSiLogLoss'),
                 target_key: str = 'gt_depth_map',
                 align_corners: bool = False,
                 init_std: float = 0.001,
                 **kwargs) -> None:
        stack_out = (list(conv_out_channels) or list(deconv_out_channels)
                     or [in_channels])
        if stack_out[-1] != channels:
            raise ValueError(
                f'channels={channels} must equal the output channels of the '
                f'last deconv/conv layer ({stack_out[-1]}); set channels to '
                'that value.')
        for key in ('num_classes', 'threshold'):
            if key in kwargs:
                raise TypeError(f'{type(self).__name__} is a regression head:'
                                f' remove `{key}` from its config and set '
                                '`out_channels` instead.')
        super().__init__(
            in_channels,
            channels,
            num_classes=out_channels,
            out_channels=out_channels,
            threshold=0.0,  # unused: regression, no binary decision
            dropout_ratio=dropout_ratio,
            loss_decode=loss_decode,
            align_corners=align_corners,
            **kwargs)
        self.target_key = target_key
        if deconv_kernel_sizes is None:
            deconv_kernel_sizes = (4, ) * len(deconv_out_channels)
        if conv_kernel_sizes is None:
            conv_kernel_sizes = (1, ) * len(conv_out_channels)
        self.deconv_layers = make_deconv_stack(self.in_channels,
                                               deconv_out_channels,
                                               deconv_kernel_sizes)
        deconv_out = (deconv_out_channels[-1]
                      if deconv_out_channels else self.in_channels)
        self.conv_layers = make_conv_stack(deconv_out, conv_out_channels,
                                           conv_kernel_sizes)
        self.upsample_factor = 2**len(deconv_out_channels)
        # Construction-time init (the convention of every Sapiens dense
        # head); a Pretrained init_cfg or a checkpoint loaded later
        # overwrites it.
        init_upsample_stack(self.deconv_layers, std=init_std)
        init_upsample_stack(self.conv_layers, std=init_std)

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
        x = self._transform_inputs(inputs)
        x = self.deconv_layers(x)
        x = self.conv_layers(x)
        return self.cls_seg(x)

    def _stack_batch_gt(self, batch_data_samples: SampleList) -> Tensor:
        targets = []
        for sample in batch_data_samples:
            if self.target_key not in sample:
                raise KeyError(
                    f'Data sample has no `{self.target_key}` target; put '
                    'LoadDenseAnnotations, the Generate*Target transform and '
                    'PackDenseInputs in the training pipeline.')
            targets.append(sample.get(self.target_key).data)
        return torch.stack(targets, dim=0)

    def check_target(self, pred: Tensor, target: Tensor) -> None:
        """Refuse a (B, C, H, W) ``target`` that does not fit the (B,
        out_channels, h, w) ``pred`` (here: another channel count).

        Raises:
            ValueError: The target does not fit.
        """
        if target.shape[1] != pred.shape[1]:
            raise ValueError(
                f'Target `{self.target_key}` has {target.shape[1]} channels '
                f'but the head predicts {pred.shape[1]}.')

    def loss_by_feat(self, seg_logits: Tensor,
                     batch_data_samples: SampleList) -> dict:
        """Loss of the (resized) prediction against the stacked targets.

        Args:
            seg_logits: (B, out_channels, h, w) head output.
            batch_data_samples: Samples holding ``target_key`` of shape
                (out_channels, H, W).

        Returns:
            ``{loss_name: loss}`` for every loss in ``loss_decode``.
        """
        target = self._stack_batch_gt(batch_data_samples).to(seg_logits)
        self.check_target(seg_logits, target)
        pred = resize(seg_logits, size=target.shape[2:], mode='bilinear',
                      align_corners=self.align_corners, warning=False)
        losses_decode = (self.loss_decode if isinstance(
            self.loss_decode, nn.ModuleList) else [self.loss_decode])
        losses = dict()
        for loss_fn in losses_decode:
            value = loss_fn(pred, target)
            name = loss_fn.loss_name
            losses[name] = losses[name] + value if name in losses else value
        return losses
