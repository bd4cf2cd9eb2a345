"""Sapiens2 albedo head."""
from typing import List, Sequence, Union

from mmseg.registry import MODELS
from mmseg.utils import ConfigType

from .sapiens2_dense_head import Sapiens2DenseHead

__all__ = ['Sapiens2AlbedoHead']


@MODELS.register_module()
class Sapiens2AlbedoHead(Sapiens2DenseHead):
    """Head of the Sapiens2 albedo model (official ``AlbedoHead``; no
    checkpoint is released).

    :class:`Sapiens2DenseHead` with :class:`RMSNorm2d` (affine, eps 1e-6) in
    place of every instance norm and 3 RGB outputs in ``conv_albedo``; the
    estimator clamps them to [0, 1] at inference. Extra keys over the normal
    head: ``input_conv.1.norm.weight``, ``upsample_blocks.{j}.2.norm.weight``
    and ``conv_layers.{1,4,7}.norm.weight``. Channel plans: as the normal
    head for 0.4b / 0.8b / 1b, and (1536, 768, 512, 256) / (64, 32, 16) for
    5b.

    Args:
        in_channels: Backbone channels.
        upsample_channels: Defaults to (768, 512, 256, 128).
        conv_out_channels: Defaults to (64, 32, 16).
        loss_decode: Defaults to the official losses: ``AlbedoLoss`` terms
            ``'l1'`` (weight 2), ``'grad'`` (2) and ``'chromaticity'`` (1).
        target_key: Defaults to ``'gt_albedo_map'``.
        **kwargs: Other :class:`Sapiens2DenseHead` options.
    """

    def __init__(self,
                 in_channels: int,
                 upsample_channels: Sequence[int] = (768, 512, 256, 128),
                 conv_out_channels: Sequence[int] = (64, 32, 16),
                 loss_decode: Union[ConfigType, List[ConfigType]] = (
                     dict(type='AlbedoLoss', term='l1', loss_weight=2.0),
                     dict(type='AlbedoLoss', term='grad', loss_weight=2.0),
                     dict(type='AlbedoLoss', term='chromaticity',
                          loss_weight=1.0)),
                 target_key: str = 'gt_albedo_map',
                 **kwargs) -> None:
        if kwargs.pop('out_channels', 3) != 3:
            raise ValueError('An albedo head predicts 3 channels (RGB).')
        super().__init__(
            in_channels,
            upsample_channels=upsample_channels,
            conv_out_channels=conv_out_channels,
            out_channels=3,
            norm=kwargs.pop('norm', 'rms'),
            final_layer_name='conv_albedo',
            loss_decode=list(loss_decode) if isinstance(
                loss_decode, tuple) else loss_decode,
            target_key=target_key,
            **kwargs)
