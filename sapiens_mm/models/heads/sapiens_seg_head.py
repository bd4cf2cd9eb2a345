"""Sapiens dense-prediction decode head for mmseg (body-part segmentation).

A ``BaseDecodeHead`` whose neck is the shared Sapiens upsampling stack
(:mod:`sapiens_mm.models.heads.upsample`): stride-2 deconvolutions, then
same-size convolutions, each followed by InstanceNorm2d (no affine) and SiLU,
then dropout and the 1x1 classifier ``conv_seg``. The module names
(``deconv_layers``, ``conv_layers``, ``conv_seg``) match the official
checkpoints, so they load strictly into an mmseg ``EncoderDecoder``.
"""
import copy
from typing import Dict, List, Optional, Sequence, Union

import torch
from mmseg.models.decode_heads.decode_head import BaseDecodeHead
from mmseg.registry import MODELS
from mmseg.utils import ConfigType, SampleList

from sapiens_mm.datasets.metainfo import load_body_part_classes

from .upsample import init_upsample_stack, make_conv_stack, make_deconv_stack

__all__ = ['SapiensSegHead', 'resolve_class_weight']

_VOCABS = ('goliath_28', 'lip_cihp_20', 'dome_29')


def resolve_class_weight(loss_cfg: Union[dict, Sequence[dict]],
                         num_classes: int) -> Union[dict, List[dict]]:
    """Replace a vocabulary name in ``class_weight`` by its official weights.

    ``class_weight='goliath_28'`` (or ``'lip_cihp_20'``, ``'dome_29'``)
    becomes the list of per-class weights shipped in
    ``sapiens_mm/data/body_part_classes.json``, so configs do not restate
    them. Other values are left as they are.

    Args:
        loss_cfg: One loss config or a list of them.
        num_classes: Number of classes of the head, checked against the
            vocabulary.

    Returns:
        A copy of ``loss_cfg`` with the weights filled in.
    """
    if isinstance(loss_cfg, (list, tuple)):
        return [resolve_class_weight(c, num_classes) for c in loss_cfg]
    loss_cfg = copy.deepcopy(loss_cfg)
    weight = loss_cfg.get('class_weight') if isinstance(loss_cfg,
                                                        dict) else None
    if isinstance(weight, str) and weight in _VOCABS:
        weights = list(load_body_part_classes(weight)['class_weight'])
        if len(weights) != num_classes:
            raise ValueError(
                f'class_weight={weight!r} has {len(weights)} classes but the '
                f'head has num_classes={num_classes}; set num_classes='
                f'{len(weights)} or use the vocabulary of your data.')
        loss_cfg['class_weight'] = weights
    return loss_cfg


@MODELS.register_module()
class SapiensSegHead(BaseDecodeHead):
    """Sapiens deconv + conv decode head (official ``VitHead`` layout).

    With the defaults (three 4x4 stride-2 deconvolutions of 768 channels and
    three 1x1 convolutions of 768 channels) a (B, C, H/16, W/16) ViT feature
    map becomes (B, num_classes, H/2, W/2) logits, e.g. 512x384 for a 1024x768
    image. ``BaseDecodeHead.loss_by_feat`` upsamples them (bilinear) to the
    label size for the loss; ``predict`` resizes them to the input size.

    The depth / normal heads reuse this class with other channel and kernel
    lists and ``num_classes`` 1 or 3.

    Loss: any mmseg loss. In ``loss_decode`` a ``class_weight`` may name a
    package vocabulary (``'goliath_28'`` or ``'lip_cihp_20'``) to use its
    official class weights. A loss computed with ``reduction='none'`` (as in
    the official configs) is averaged here over every label pixel, ignored
    ones included as zeros, which is the value mmengine's ``parse_losses``
    gave the official model; the logged loss is then a scalar.

    Args:
        in_channels: Channels of the backbone feature map (embed dims).
        channels: Channels fed to ``conv_seg``; must equal the last conv
            (or, without convs, deconv) output channels. Defaults to 768.
        num_classes: Number of output classes (28 for Goliath, 20 for
            LIP / CIHP).
        deconv_out_channels: Output channels of each stride-2 deconvolution.
            Defaults to (768, 768, 768).
        deconv_kernel_sizes: Kernel size of each deconvolution (2, 3 or 4).
            Defaults to (4, 4, 4).
        conv_out_channels: Output channels of each same-size convolution.
            Defaults to (768, 768, 768).
        conv_kernel_sizes: Kernel size of each convolution. Defaults to
            (1, 1, 1).
        dropout_ratio: Dropout2d ratio before ``conv_seg``. Defaults to 0.1.
        init_std: Std of the normal init of the (de)conv stacks. Defaults
            to 0.001.
        loss_decode: Loss config(s). Defaults to (unweighted)
            cross-entropy.
        **kwargs: Other ``BaseDecodeHead`` options (``ignore_index``,
            ``align_corners``, ``in_index``, ``init_cfg``...). ``norm_cfg``
            and ``act_cfg`` are accepted but unused: the stack always uses
            InstanceNorm2d and SiLU, as the official head does.
    """

    def __init__(self,
                 in_channels: int,
                 channels: int = 768,
                 *,
                 num_classes: int,
                 deconv_out_channels: Sequence[int] = (768, 768, 768),
                 deconv_kernel_sizes: Sequence[int] = (4, 4, 4),
                 conv_out_channels: Sequence[int] = (768, 768, 768),
                 conv_kernel_sizes: Sequence[int] = (1, 1, 1),
                 dropout_ratio: float = 0.1,
                 init_std: float = 0.001,
                 loss_decode: Optional[Union[ConfigType,
                                             Sequence[ConfigType]]] = None,
                 **kwargs) -> None:
        if not isinstance(in_channels, int):
            raise TypeError(
                f'{type(self).__name__} takes one feature map: in_channels '
                f'must be an int, got {in_channels!r}.')
        deconv_out_channels = tuple(deconv_out_channels)
        conv_out_channels = tuple(conv_out_channels)
        last = (conv_out_channels or deconv_out_channels
                or (in_channels, ))[-1]
        if channels != last:
            raise ValueError(
                f'channels={channels} must equal the output channels of the '
                f'last upsampling layer ({last}), which feed conv_seg; set '
                f'channels={last} or change the layer channel lists.')
        if loss_decode is None:
            loss_decode = dict(
                type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)
        super().__init__(
            in_channels,
            channels,
            num_classes=num_classes,
            dropout_ratio=dropout_ratio,
            loss_decode=resolve_class_weight(loss_decode, num_classes),
            **kwargs)
        self.deconv_layers = make_deconv_stack(in_channels,
                                               deconv_out_channels,
                                               tuple(deconv_kernel_sizes))
        mid = deconv_out_channels[-1] if deconv_out_channels else in_channels
        self.conv_layers = make_conv_stack(mid, conv_out_channels,
                                           tuple(conv_kernel_sizes))
        # Construction-time init; a Pretrained init_cfg or a checkpoint
        # loaded later overwrites it.
        init_upsample_stack(self.deconv_layers, std=init_std)
        init_upsample_stack(self.conv_layers, std=init_std)

    def forward(self, inputs: Union[torch.Tensor, Sequence[torch.Tensor]]
                ) -> torch.Tensor:
        """Upsample a feature map and classify every pixel.

        Args:
            inputs: Backbone outputs, a tuple of (B, C, h, w) maps (the one
                at ``in_index`` is used) or a single tensor.

        Returns:
            (B, num_classes, h * 2**D, w * 2**D) logits, D the number of
            deconvolutions.
        """
        if isinstance(inputs, torch.Tensor):
            inputs = [inputs]
        x = self._transform_inputs(inputs)
        x = self.deconv_layers(x)
        x = self.conv_layers(x)
        return self.cls_seg(x)

    def loss_by_feat(
            self, seg_logits: torch.Tensor,
            batch_data_samples: SampleList) -> Dict[str, torch.Tensor]:
        """mmseg's loss, with unreduced losses averaged to scalars."""
        losses = super().loss_by_feat(seg_logits, batch_data_samples)
        for name, value in losses.items():
            if isinstance(value, torch.Tensor) and value.dim() > 0 and \
                    name.startswith('loss'):
                losses[name] = value.mean()
        return losses
