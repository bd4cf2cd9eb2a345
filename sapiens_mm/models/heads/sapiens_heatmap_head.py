"""Sapiens top-down heatmap head (mmpose ``HeatmapHead`` with IN + SiLU)."""
from typing import Optional, Sequence

import torch.nn as nn
from mmpose.models.heads import HeatmapHead
from mmpose.registry import MODELS
from mmpose.utils.typing import ConfigType, OptConfigType

from .upsample import init_upsample_stack, make_conv_stack, make_deconv_stack

__all__ = ['SapiensHeatmapHead']


@MODELS.register_module()
class SapiensHeatmapHead(HeatmapHead):
    """Heatmap head of the official Sapiens pose models.

    Upstream :class:`mmpose.models.heads.HeatmapHead` with the Sapiens
    upsampling stack (:mod:`sapiens_mm.models.heads.upsample`): every
    stride-2 deconvolution (no bias) and every convolution is followed by
    ``InstanceNorm2d(affine=False)`` and ``SiLU`` instead of BatchNorm and
    ReLU, then a 1x1 convolution gives one heatmap per keypoint. Training
    (``loss``), decoding and flip test (``predict`` with
    ``test_cfg=dict(flip_test=True, flip_mode='heatmap')``) are upstream's.

    With the official settings (the defaults) a (B, C, 64, 48) feature map of
    a 1024x768 image becomes (B, K, 256, 192) heatmaps, and the state-dict
    keys are those of the released checkpoints: ``deconv_layers.{0,3}``,
    ``conv_layers.{0,3}`` and ``final_layer``.

    Args:
        in_channels: Channels of the backbone feature map (the backbone's
            ``embed_dims``).
        out_channels: Number of keypoints K (heatmap channels).
        deconv_out_channels: Output channels of each 2x deconvolution.
            Defaults to (768, 768).
        deconv_kernel_sizes: Kernel size of each deconvolution (2, 3 or 4).
            Defaults to (4, 4).
        conv_out_channels: Output channels of each convolution after the
            deconvolutions. Defaults to (768, 768).
        conv_kernel_sizes: Kernel size of each of those convolutions.
            Defaults to (1, 1).
        loss: Keypoint loss config. Defaults to
            ``KeypointMSELoss(use_target_weight=True)``; the official
            Goliath 0.3b / 1b models use
            ``KeypointOHKMMSELoss(use_target_weight=True, topk=128)``.
        decoder: Heatmap codec used to decode predictions; give the same
            ``codec`` dict as the pipeline's ``GenerateTarget``.
        init_cfg: Initialisation config. ``None`` (default) gives the
            official init: Normal(0, 0.001) weights and zero biases for every
            (transposed) convolution.

    Shapes:
        - Input: a tuple of features whose last element is (B, C, H, W).
        - Output of :meth:`forward`: (B, K, H * 2**n, W * 2**n) for ``n``
          deconvolutions.
    """

    def __init__(self,
                 in_channels: int,
                 out_channels: int,
                 deconv_out_channels: Sequence[int] = (768, 768),
                 deconv_kernel_sizes: Sequence[int] = (4, 4),
                 conv_out_channels: Sequence[int] = (768, 768),
                 conv_kernel_sizes: Sequence[int] = (1, 1),
                 loss: ConfigType = dict(
                     type='KeypointMSELoss', use_target_weight=True),
                 decoder: OptConfigType = None,
                 init_cfg: OptConfigType = None) -> None:
        if not isinstance(in_channels, int):
            raise TypeError(
                f'{type(self).__name__} takes one feature map: in_channels '
                f'must be an int (the backbone embed_dims), got '
                f'{in_channels!r}.')
        # Let HeatmapHead set up loss, decoder and flip-test logic; the layers
        # are replaced by the Sapiens stack below.
        super().__init__(
            in_channels=in_channels,
            out_channels=out_channels,
            deconv_out_channels=None,
            conv_out_channels=None,
            final_layer=None,
            loss=loss,
            decoder=decoder,
            init_cfg=init_cfg)
        deconv_out_channels = tuple(deconv_out_channels or ())
        conv_out_channels = tuple(conv_out_channels or ())
        self.deconv_layers = make_deconv_stack(in_channels,
                                               deconv_out_channels,
                                               tuple(deconv_kernel_sizes or ()))
        channels = deconv_out_channels[-1] if deconv_out_channels \
            else in_channels
        self.conv_layers = make_conv_stack(channels, conv_out_channels,
                                           tuple(conv_kernel_sizes or ()))
        channels = conv_out_channels[-1] if conv_out_channels else channels
        self.final_layer = nn.Conv2d(channels, out_channels, kernel_size=1)

    @property
    def default_init_cfg(self) -> Optional[list]:
        # The official init is applied by init_weights() without an init_cfg.
        return None

    def init_weights(self) -> None:
        """Official init unless an ``init_cfg`` (e.g. Pretrained) is set."""
        super().init_weights()
        if not self.init_cfg:
            init_upsample_stack(self)
