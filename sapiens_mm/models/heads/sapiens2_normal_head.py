"""Sapiens2 surface-normal head."""
from typing import List, Sequence, Union

from mmseg.registry import MODELS
from mmseg.utils import ConfigType

from .sapiens2_dense_head import Sapiens2DenseHead

__all__ = ['Sapiens2NormalHead']


@MODELS.register_module()
class Sapiens2NormalHead(Sapiens2DenseHead):
    """Head of the Sapiens2 normal models (official ``NormalHead``).

    :class:`Sapiens2DenseHead` with 3 outputs in ``conv_normal``: camera-frame
    normals at the input resolution, not normalised (the estimator
    L2-normalises them at inference). Channel plans: upsampling
    (768, 512, 256, 128) and convs (64, 32, 16) for 0.4b / 0.8b / 1b,
    (1536, 768, 512, 256) and (128, 64, 32) for 5b.

    Args:
        in_channels: Backbone channels.
        upsample_channels: Defaults to (768, 512, 256, 128).
        conv_out_channels: Defaults to (64, 32, 16).
        loss_decode: Defaults to the official masked losses:
            ``NormalCosineLoss`` (weight 10), ``NormalL1Loss`` (1) and
            ``NormalGradLoss`` (10).
        target_key: Defaults to ``'gt_normal_map'``.
        **kwargs: Other :class:`Sapiens2DenseHead` options.
    """

    def __init__(self,
                 in_channels: int,
                 upsample_channels: Sequence[int] = (768, 512, 256, 128),
                 conv_out_channels: Sequence[int] = (64, 32, 16),
                 loss_decode: Union[ConfigType, List[ConfigType]] = (
                     dict(type='NormalCosineLoss', loss_weight=10.0),
                     dict(type='NormalL1Loss', loss_weight=1.0),
                     dict(type='NormalGradLoss', loss_weight=10.0)),
                 target_key: str = 'gt_normal_map',
                 **kwargs) -> None:
        if kwargs.pop('out_channels', 3) != 3:
            raise ValueError('A normal head predicts 3 channels (X, Y, Z).')
        super().__init__(
            in_channels,
            upsample_channels=upsample_channels,
            conv_out_channels=conv_out_channels,
            out_channels=3,
            final_layer_name='conv_normal',
            loss_decode=list(loss_decode) if isinstance(
                loss_decode, tuple) else loss_decode,
            target_key=target_key,
            **kwargs)
