"""Sapiens surface-normal head."""
from typing import List, Optional, Sequence, Union

from mmseg.registry import MODELS
from mmseg.utils import ConfigType

from .sapiens_depth_head import SapiensDepthHead

__all__ = ['SapiensNormalHead']


@MODELS.register_module()
class SapiensNormalHead(SapiensDepthHead):
    """Head that regresses camera-frame surface normals.

    The official ``VitNormalHead`` is the depth head with another
    configuration, so this class only changes defaults: three deconvolutions
    and three 1x1 convolutions of 768 channels, and 3 outputs (X, Y, Z) at
    1/2 of the input resolution (x8 from the 1/16 features: 512x384 for a
    1024x768 input). The output is not normalised here; the loss compares
    it to the unit target after a bilinear resize, and the estimator returns
    unit vectors at inference. Keys: ``deconv_layers.{0,3,6}.weight``,
    ``conv_layers.{0,3,6}.weight|bias``, ``conv_seg.weight|bias``.

    Args:
        in_channels: Backbone channels (``embed_dims``).
        channels: Input channels of ``conv_seg``. Defaults to 768.
        deconv_out_channels: Defaults to (768, 768, 768).
        deconv_kernel_sizes: Defaults to 4 for every layer.
        conv_out_channels: Defaults to (768, 768, 768).
        conv_kernel_sizes: Defaults to 1 for every layer.
        out_channels: Must be 3. Defaults to 3.
        loss_decode: Defaults to ``NormalCosineLoss`` + ``NormalL1Loss``
            (summed into the total loss, logged apart).
        target_key: Defaults to ``'gt_normal_map'``.
        **kwargs: Other :class:`SapiensDepthHead` options.
    """

    def __init__(self,
                 in_channels: int,
                 channels: int = 768,
                 deconv_out_channels: Sequence[int] = (768, 768, 768),
                 deconv_kernel_sizes: Optional[Sequence[int]] = None,
                 conv_out_channels: Sequence[int] = (768, 768, 768),
                 conv_kernel_sizes: Optional[Sequence[int]] = None,
                 out_channels: int = 3,
                 loss_decode: Union[ConfigType, List[ConfigType]] = (
                     dict(type='NormalCosineLoss'),
                     dict(type='NormalL1Loss')),
                 target_key: str = 'gt_normal_map',
                 **kwargs) -> None:
        if out_channels != 3:
            raise ValueError(f'A normal head predicts 3 channels (X, Y, Z), '
                             f'got out_channels={out_channels}.')
        super().__init__(
            in_channels,
            channels=channels,
            deconv_out_channels=deconv_out_channels,
            deconv_kernel_sizes=deconv_kernel_sizes,
            conv_out_channels=conv_out_channels,
            conv_kernel_sizes=conv_kernel_sizes,
            out_channels=out_channels,
            loss_decode=list(loss_decode) if isinstance(
                loss_decode, tuple) else loss_decode,
            target_key=target_key,
            **kwargs)
