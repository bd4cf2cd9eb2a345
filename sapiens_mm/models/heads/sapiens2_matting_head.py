"""Sapiens2 human-matting head."""
from typing import List, Sequence, Tuple, Union

import torch
from mmseg.registry import MODELS
from mmseg.utils import ConfigType
from torch import Tensor

from .sapiens2_dense_head import Sapiens2DenseHead

__all__ = ['Sapiens2MattingHead', 'MATTING_TARGET_CHANNELS']

#: Channels of the packed ``gt_matting`` target (see
#: :class:`~sapiens_mm.datasets.transforms.GenerateMattingTarget`): alpha,
#: the image RGB, the foreground RGB and the background RGB, all in [0, 1];
#: foreground / background are -1 where the sample has none.
MATTING_TARGET_CHANNELS = 10


@MODELS.register_module()
class Sapiens2MattingHead(Sapiens2DenseHead):
    """Head of the Sapiens2 matting model (``facebook/sapiens2-matting-1b``;
    Transformers' ``Sapiens2ForImageMatting``).

    The generic Sapiens2 dense trunk (:class:`Sapiens2DenseHead`: input
    conv, PixelShuffle upsampling blocks, 3x3 convs) with 4 outputs in
    ``conv_matting`` and a sigmoid: channels 0-2 are the foreground RGB
    **pre-multiplied** by alpha, channel 3 is alpha, all in [0, 1] at the
    input resolution. State-dict keys are those of the normal head with
    ``conv_matting`` for ``conv_normal``.

    Training (:class:`SapiensDepthHead`'s ``loss_by_feat``): the
    prediction is resized bilinearly to the packed ``gt_matting`` target
    (``MATTING_TARGET_CHANNELS`` channels: alpha, image, foreground,
    background) and every loss in ``loss_decode``
    (:class:`~sapiens_mm.models.losses.MattingLoss` terms) is summed by
    name.

    Args:
        in_channels: Backbone channels.
        upsample_channels: Defaults to (768, 512, 256, 128).
        conv_out_channels: Defaults to (64, 32, 16).
        loss_decode: Defaults to alpha L1 (1), Laplacian pyramid (1),
            composition (1) and foreground (1); see ``MattingLoss``.
        target_key: Defaults to ``'gt_matting'``.
        **kwargs: Other :class:`Sapiens2DenseHead` options.
    """

    def __init__(self,
                 in_channels: int,
                 upsample_channels: Sequence[int] = (768, 512, 256, 128),
                 conv_out_channels: Sequence[int] = (64, 32, 16),
                 loss_decode: Union[ConfigType, List[ConfigType]] = (
                     dict(type='MattingLoss', term='alpha_l1'),
                     dict(type='MattingLoss', term='laplacian'),
                     dict(type='MattingLoss', term='composition'),
                     dict(type='MattingLoss', term='foreground')),
                 target_key: str = 'gt_matting',
                 **kwargs) -> None:
        if kwargs.pop('out_channels', 4) != 4:
            raise ValueError('A matting head predicts 4 channels '
                             '(pre-multiplied foreground RGB and alpha).')
        super().__init__(
            in_channels,
            upsample_channels=upsample_channels,
            conv_out_channels=conv_out_channels,
            out_channels=4,
            final_layer_name='conv_matting',
            loss_decode=list(loss_decode) if isinstance(
                loss_decode, tuple) else loss_decode,
            target_key=target_key,
            **kwargs)

    def forward(self, inputs: Union[Tensor, Tuple[Tensor, ...]]) -> Tensor:
        """Predict the matte.

        Args:
            inputs: Backbone outputs; the one at ``in_index`` is
                (B, in_channels, h, w).

        Returns:
            (B, 4, h * upsample_factor, w * upsample_factor) in [0, 1]:
            pre-multiplied foreground RGB, then alpha.
        """
        return torch.sigmoid(super().forward(inputs))

    def check_target(self, pred: Tensor, target: Tensor) -> None:
        """Refuse a target that is not a packed matting target.

        Raises:
            ValueError: ``target`` does not have ``MATTING_TARGET_CHANNELS``
                channels.
        """
        if target.shape[1] != MATTING_TARGET_CHANNELS:
            raise ValueError(
                f'Target `{self.target_key}` has {target.shape[1]} channels;'
                f' a matting target has {MATTING_TARGET_CHANNELS} (alpha, '
                'image, foreground, background): put GenerateMattingTarget '
                'and PackDenseInputs at the end of the training pipeline.')
