"""Sapiens2 pointmap head: per-pixel camera-frame XYZ plus a global scale."""
import math
from typing import List, Sequence, Tuple, Union

import torch.nn as nn
from mmseg.models.utils import resize
from mmseg.registry import MODELS
from mmseg.utils import ConfigType, SampleList
from torch import Tensor

from .sapiens2_dense_head import Sapiens2DenseHead
from .upsample import init_upsample_stack, make_conv_stack

__all__ = ['Sapiens2PointmapHead']


@MODELS.register_module()
class Sapiens2PointmapHead(Sapiens2DenseHead):
    """Head of the Sapiens2 pointmap models (official ``PointmapHead``).

    Two branches on the backbone feature map:

    * the :class:`Sapiens2DenseHead` trunk and ``conv_pointmap`` (3
      outputs): the pointmap ``P`` (X, Y, Z per pixel, OpenCV camera axes)
      in a *canonical* camera of focal length ``canonical_focal`` pixels;
    * the scale branch on the raw feature map: ``scale_conv_layers`` (1x1
      convolutions of stride 2 with bias, each + InstanceNorm + SiLU:
      C -> 1536 -> 512 -> 128), then ``scale_final_layer`` (Flatten, Linear
      -> 512, SiLU, Linear -> 128, SiLU, Linear -> 1): ``s = f_c / fx``, the
      ratio of the canonical to the real focal length (in input pixels).

    The metric pointmap is ``P / s`` (:meth:`predict_by_feat`). Because the
    scale branch flattens its last map, it only accepts the feature map size
    it was built for (``featmap_size``, (64, 48) for 1024x768 inputs:
    8 * 6 * 128 = 6144 Linear inputs).

    Channel plans: upsampling (1536, 768, 512, 256) with convs (64, 32, 16)
    for 0.4b / 0.8b / 1b; (1536, 768, 768, 768) with (128, 64, 32) for 5b.

    Args:
        in_channels: Backbone channels.
        upsample_channels: Defaults to (1536, 768, 512, 256).
        conv_out_channels: Defaults to (64, 32, 16).
        scale_conv_channels: Defaults to (1536, 512, 128).
        scale_hidden_channels: Widths of the two hidden Linear layers.
            Defaults to (512, 128).
        featmap_size: (h, w) of the backbone feature map. Defaults to
            (64, 48).
        canonical_focal: Focal length f_c (pixels) of the canonical camera.
            Defaults to 768 (official, for 1024x768 inputs).
        min_scale: Lower clamp of ``s`` before dividing by it at
            inference. Defaults to 1e-6.
        loss_decode: Defaults to ``PointmapLoss()`` (the official terms and
            weights).
        target_key: Defaults to ``'gt_pointmap'`` (canonical pointmap, see
            ``GeneratePointmapTarget``).
        **kwargs: Other :class:`Sapiens2DenseHead` options.

    Shapes:
        - Input: features whose ``in_index`` entry is (B, C, h, w), (h, w)
          = ``featmap_size``.
        - Output of :meth:`forward`: ``(pointmap, scale)``,
          (B, 3, 16h, 16w) and (B, 1).
    """

    def __init__(self,
                 in_channels: int,
                 upsample_channels: Sequence[int] = (1536, 768, 512, 256),
                 conv_out_channels: Sequence[int] = (64, 32, 16),
                 scale_conv_channels: Sequence[int] = (1536, 512, 128),
                 scale_hidden_channels: Sequence[int] = (512, 128),
                 featmap_size: Tuple[int, int] = (64, 48),
                 canonical_focal: float = 768.0,
                 min_scale: float = 1e-6,
                 loss_decode: ConfigType = dict(type='PointmapLoss'),
                 target_key: str = 'gt_pointmap',
                 **kwargs) -> None:
        if kwargs.pop('out_channels', 3) != 3:
            raise ValueError('A pointmap head predicts 3 channels (XYZ).')
        if isinstance(loss_decode, (list, tuple)):
            raise TypeError('Sapiens2PointmapHead takes one loss_decode '
                            '(a PointmapLoss config holding every term).')
        super().__init__(
            in_channels,
            upsample_channels=upsample_channels,
            conv_out_channels=conv_out_channels,
            out_channels=3,
            final_layer_name='conv_pointmap',
            loss_decode=loss_decode,
            target_key=target_key,
            **kwargs)
        scale_conv_channels = tuple(scale_conv_channels)
        self.featmap_size = tuple(int(s) for s in featmap_size)
        self.canonical_focal = float(canonical_focal)
        self.min_scale = float(min_scale)
        self.scale_conv_layers = make_conv_stack(
            in_channels, scale_conv_channels, (1, ) * len(scale_conv_channels),
            stride=2)
        h, w = self.featmap_size
        for _ in scale_conv_channels:
            h, w = math.ceil(h / 2), math.ceil(w / 2)
        if h * w < 2:
            raise ValueError(
                f'featmap_size={self.featmap_size} shrinks to {h}x{w} in the '
                'scale branch; InstanceNorm needs more than one pixel. Use a '
                'larger input (at least 256x192 for three stride-2 convs).')
        layers: List[nn.Module] = [nn.Flatten()]
        width = scale_conv_channels[-1] * h * w
        for hidden in scale_hidden_channels:
            layers += [nn.Linear(width, hidden), nn.SiLU(inplace=True)]
            width = hidden
        layers.append(nn.Linear(width, 1))
        self.scale_final_layer = nn.Sequential(*layers)
        init_upsample_stack(self.scale_conv_layers)

    def forward(self, inputs: Union[Tensor, Tuple[Tensor, ...]]
                ) -> Tuple[Tensor, Tensor]:
        """Canonical pointmap and scale.

        Args:
            inputs: Backbone outputs; the one at ``in_index`` is
                (B, C, h, w).

        Returns:
            ``(pointmap, scale)``: (B, 3, h * 2**n, w * 2**n) and (B, 1).
        """
        if isinstance(inputs, Tensor):
            inputs = (inputs, )
        x = self._transform_inputs(inputs)
        if tuple(x.shape[-2:]) != self.featmap_size:
            raise ValueError(
                f'The pointmap scale branch was built for a '
                f'{self.featmap_size} feature map but got '
                f'{tuple(x.shape[-2:])}; feed images of '
                f'{self.featmap_size[0] * 16}x{self.featmap_size[1] * 16} '
                '(ResizePadImage does) or set featmap_size.')
        pointmap = self.final_layer(self.trunk(x))
        scale = self.scale_final_layer(self.scale_conv_layers(x))
        return pointmap, scale

    def metric_pointmap(self, pointmap: Tensor, scale: Tensor) -> Tensor:
        """``pointmap / scale`` per image: (B, 3, H, W) camera-frame XYZ in
        the unit of the training data; the scale is clamped to
        ``min_scale``."""
        return pointmap / scale.clamp(min=self.min_scale).view(-1, 1, 1, 1)

    def predict_by_feat(self, seg_logits: Tuple[Tensor, Tensor],
                        batch_img_metas: List[dict]) -> Tensor:
        """Metric pointmap resized (bilinear) to the input ``img_shape``.

        Returns:
            (B, 3, H, W).
        """
        metric = self.metric_pointmap(*seg_logits)
        return resize(metric, size=batch_img_metas[0]['img_shape'],
                      mode='bilinear', align_corners=self.align_corners,
                      warning=False)

    def loss_by_feat(self, seg_logits: Tuple[Tensor, Tensor],
                     batch_data_samples: SampleList) -> dict:
        """Every :class:`PointmapLoss` term.

        Args:
            seg_logits: ``(pointmap, scale)`` from :meth:`forward`.
            batch_data_samples: Samples with ``gt_pointmap`` (3, H, W; the
                canonical pointmap, zero where invalid) and the metainfo
                ``pointmap_scale`` (the target s) and
                ``pointmap_intrinsics`` ((fx, fy, cx, cy) of the input).

        Returns:
            ``{loss_name: loss}``.
        """
        pointmap, scale = seg_logits
        target = self._stack_batch_gt(batch_data_samples).to(pointmap)
        pointmap = resize(pointmap, size=target.shape[2:], mode='bilinear',
                          align_corners=self.align_corners, warning=False)
        metas = [s.metainfo for s in batch_data_samples]
        for key in ('pointmap_scale', 'pointmap_intrinsics'):
            if any(key not in m for m in metas):
                raise KeyError(
                    f'Data samples need `{key}` in their metainfo; put '
                    'GeneratePointmapTarget before PackDenseInputs.')
        gt_scale = pointmap.new_tensor([m['pointmap_scale'] for m in metas])
        intrinsics = pointmap.new_tensor(
            [list(m['pointmap_intrinsics']) for m in metas])
        # intrinsics are those of the target's grid
        return self.loss_decode(pointmap, scale.view(-1), target,
                                gt_scale, intrinsics)
