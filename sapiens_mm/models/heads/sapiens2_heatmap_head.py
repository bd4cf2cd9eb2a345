"""Sapiens2 top-down heatmap head (official ``PoseHeatmapHead`` layout)."""
from typing import Sequence, Tuple, Union

import torch.nn as nn
from mmpose.registry import MODELS
from mmpose.utils.typing import ConfigType, OptConfigType
from torch import Tensor

from .sapiens_heatmap_head import SapiensHeatmapHead

__all__ = ['Sapiens2HeatmapHead']


@MODELS.register_module()
class Sapiens2HeatmapHead(SapiensHeatmapHead):
    """Heatmap head of the Sapiens2 pose models.

    :class:`SapiensHeatmapHead` (stride-2 4x4 deconvolutions without bias and
    1x1 convolutions, each followed by ``InstanceNorm2d`` and ``SiLU``) with
    the Sapiens2 channel plan and the output convolution named ``conv_pose``
    (v1: ``final_layer``), so the keys are those of the released
    ``sapiens2_<size>_pose.safetensors`` files: ``deconv_layers.{0,3}``,
    ``conv_layers.{0,3,6}`` and ``conv_pose`` (under ``decode_head.`` in the
    file; the mmpose estimator holds the head as ``head.``). The output has
    no activation. Loss, decoding and flip test are upstream ``HeatmapHead``'s.

    A (B, C, 64, 48) feature map of a 1024x768 crop becomes (B, K, 256, 192)
    heatmaps.

    Args:
        in_channels: Backbone channels (``embed_dims``).
        out_channels: Number of keypoints K. Defaults to 308 (Goliath).
        deconv_out_channels: Defaults to (1024, 768) (0.4b / 0.8b / 5b; 1b
            uses (1536, 1024)).
        deconv_kernel_sizes: Defaults to (4, 4).
        conv_out_channels: Defaults to (512, 512, 256) (1b: (768, 512,
            256)).
        conv_kernel_sizes: Defaults to (1, 1, 1).
        loss: Defaults to ``KeypointMSELoss(use_target_weight=True,
            loss_weight=10)`` (official).
        decoder: The pipeline's ``codec`` (``UDPHeatmap``).
        init_cfg: As for :class:`SapiensHeatmapHead`.

    Shapes:
        - Input: a tuple of features whose last element is (B, C, H, W).
        - Output of :meth:`forward`: (B, K, 4H, 4W) with two deconvolutions.
    """

    def __init__(self,
                 in_channels: int,
                 out_channels: int = 308,
                 deconv_out_channels: Sequence[int] = (1024, 768),
                 deconv_kernel_sizes: Sequence[int] = (4, 4),
                 conv_out_channels: Sequence[int] = (512, 512, 256),
                 conv_kernel_sizes: Sequence[int] = (1, 1, 1),
                 loss: ConfigType = dict(
                     type='KeypointMSELoss',
                     use_target_weight=True,
                     loss_weight=10.0),
                 decoder: OptConfigType = None,
                 init_cfg: OptConfigType = None) -> None:
        super().__init__(
            in_channels=in_channels,
            out_channels=out_channels,
            deconv_out_channels=deconv_out_channels,
            deconv_kernel_sizes=deconv_kernel_sizes,
            conv_out_channels=conv_out_channels,
            conv_kernel_sizes=conv_kernel_sizes,
            loss=loss,
            decoder=decoder,
            init_cfg=init_cfg)
        # Same 1x1 output convolution, under the Sapiens2 name (one module,
        # one key; `final_layer` stays readable, see the property).
        self.conv_pose = self._modules.pop('final_layer')

    @property
    def final_layer(self) -> nn.Module:
        """The output convolution ``conv_pose`` (upstream's name)."""
        return self.conv_pose

    def forward(self, feats: Union[Tensor, Tuple[Tensor, ...]]) -> Tensor:
        """Heatmaps of the last feature map.

        Args:
            feats: Backbone outputs; the last one is (B, C, H, W).

        Returns:
            (B, K, H * 2**n, W * 2**n) heatmaps, n the number of
            deconvolutions.
        """
        x = feats if isinstance(feats, Tensor) else feats[-1]
        return self.conv_pose(self.conv_layers(self.deconv_layers(x)))
