"""Dense regression estimator for Sapiens relative depth and normals."""
import copy
from typing import List, Literal, Optional

import torch
import torch.nn.functional as F
from mmengine.structures import PixelData
from mmseg.models.segmentors import DepthEstimator
from mmseg.models.utils import resize
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample
from mmseg.utils import OptSampleList, SampleList
from torch import Tensor

__all__ = ['SapiensDenseEstimator']



@MODELS.register_module()
class SapiensDenseEstimator(DepthEstimator):
    """Backbone + dense regression head for depth or surface normals.

    A :class:`mmseg.models.DepthEstimator` (so ``loss`` / ``predict`` /
    ``tensor`` modes and the Runner work as for any mmseg model) with:

    * ``task='depth'`` or ``'normal'``: the output field
      (``pred_depth_map`` (1, H, W) or ``pred_normal_map`` (3, H, W)) and the
      flip rule (a horizontal flip negates the X component of a normal).
    * Test modes in ``test_cfg``: ``mode='whole'`` (default) or ``'slide'``
      (``crop_size`` and ``stride``, each (h, w)), plus ``flip=True`` to
      average with the prediction of the horizontally flipped input
      (``mode='slide_flip'`` is the official spelling of slide + flip).
    * Outputs at the original image size (``ori_shape``), un-padded and
      un-flipped; normals are returned as unit vectors.
    * Training targets are re-padded with the task's invalid value (-1 for
      depth, the zero vector for normals) wherever the data preprocessor
      padded the input, so padding never counts as ground truth.

    Args:
        task: ``'depth'`` or ``'normal'``.
        **kwargs: ``backbone``, ``decode_head``, ``data_preprocessor``,
            ``train_cfg``, ``test_cfg``, ``init_cfg``... as for
            ``DepthEstimator``.
    """

    #: Per task: output channels, target and prediction fields, the target
    #: value of padded pixels (invalid for the task's loss), and which
    #: channels a horizontal / vertical flip negates.
    OUT_CHANNELS = dict(depth=1, normal=3)
    TARGET_KEY = dict(depth='gt_depth_map', normal='gt_normal_map')
    PRED_KEY = dict(depth='pred_depth_map', normal='pred_normal_map')
    INVALID = dict(depth=-1.0, normal=0.0)
    FLIP_NEGATES = ('normal', )

    def __init__(self, task: Literal['depth', 'normal'] = 'depth',
                 **kwargs) -> None:
        if task not in self.OUT_CHANNELS:
            raise ValueError(f'task must be one of {list(self.OUT_CHANNELS)}'
                             f' for {type(self).__name__}, got {task!r}.')
        super().__init__(**kwargs)
        self.task = task
        if self.out_channels != self.OUT_CHANNELS[task]:
            raise ValueError(
                f'task={task!r} needs a decode head with '
                f'{self.OUT_CHANNELS[task]} output channels, got '
                f'{self.out_channels}; use the head of the task (e.g. '
                'SapiensDepthHead for depth, SapiensNormalHead for '
                'normals).')
        self._check_test_cfg(self.test_cfg)

    @property
    def pred_key(self) -> str:
        """Data-sample field of the prediction."""
        return self.PRED_KEY[self.task]

    @staticmethod
    def _check_test_cfg(test_cfg) -> None:
        cfg = test_cfg or {}
        mode = cfg.get('mode', 'whole')
        if mode not in ('whole', 'slide', 'slide_flip'):
            raise ValueError(f'test_cfg.mode must be "whole", "slide" or '
                             f'"slide_flip", got {mode!r}.')
        if mode != 'whole' and not ('crop_size' in cfg and 'stride' in cfg):
            raise ValueError(f'test_cfg.mode={mode!r} needs crop_size=(h, w)'
                             ' and stride=(h, w) in test_cfg.')

    # ----------------------------------------------------------- training
    def loss(self, inputs: Tensor, data_samples: SampleList) -> dict:
        """Losses of a batch; see ``DepthEstimator.loss``.

        Args:
            inputs: (N, 3, H, W) preprocessed images.
            data_samples: Samples with the task's target
                (``gt_depth_map`` (1, h, w) / ``gt_normal_map`` (3, h, w)).
        """
        self._pad_targets(inputs, data_samples)
        return super().loss(inputs, data_samples)

    def _pad_targets(self, inputs: Tensor, data_samples: SampleList) -> None:
        """Make every target cover the padded input, padding = invalid."""
        key = self.TARGET_KEY[self.task]
        H, W = inputs.shape[-2:]
        for sample in data_samples:
            if key not in sample:
                continue
            target = sample.get(key).data
            h, w = target.shape[-2:]
            if (h, w) == (H, W) and 'padding_size' not in sample:
                continue
            # drop whatever the preprocessor padded with, keep the image part
            img_h, img_w = sample.metainfo.get('img_shape', (h, w))[:2]
            h, w = min(h, int(img_h)), min(w, int(img_w))
            if (h, w) == (H, W):
                continue
            if h > H or w > W:
                raise ValueError(
                    f'Target {key} of size {(h, w)} is larger than the '
                    f'input {(H, W)}; keep targets at the image resolution.')
            target = F.pad(target[..., :h, :w], (0, W - w, 0, H - h),
                           value=self.INVALID[self.task])
            sample.set_data({key: PixelData(data=target)})

    # ----------------------------------------------------------- inference
    def unflip(self, pred: Tensor, direction: str = 'horizontal') -> Tensor:
        """Map a prediction of a flipped image back to the original frame.

        Flips the map and, for vector tasks (``FLIP_NEGATES``: normals,
        pointmaps), negates the X (horizontal flip) or Y (vertical flip)
        component.
        """
        if direction == 'horizontal':
            pred = pred.flip(dims=(-1, ))
            channel = 0
        elif direction == 'vertical':
            pred = pred.flip(dims=(-2, ))
            channel = 1
        else:
            raise ValueError(f'Cannot undo a {direction!r} flip; only '
                             '"horizontal" and "vertical" are supported.')
        if self.task in self.FLIP_NEGATES:
            sign = torch.ones(pred.shape[-3], dtype=pred.dtype,
                              device=pred.device)
            sign[channel] = -1.0
            pred = pred * sign.view(-1, 1, 1)
        return pred

    def _predict_crop(self, inputs: Tensor, batch_img_metas: List[dict],
                      flip: bool) -> Tensor:
        """Head output resized to the size of ``inputs``, optionally
        averaged with the un-flipped prediction of the flipped input."""
        metas = [copy.copy(m) for m in batch_img_metas]
        for m in metas:
            # BaseDecodeHead.predict_by_feat resizes to a torch.Size
            # ``img_shape`` as given, whatever the pipeline stored there.
            m['img_shape'] = inputs.shape[2:]
        pred = self.encode_decode(inputs, metas)
        if flip:
            flipped = self.encode_decode(inputs.flip(dims=(3, )), metas)
            pred = (pred + self.unflip(flipped)) / 2.0
        return pred

    def whole_inference(self, inputs: Tensor, batch_img_metas: List[dict],
                        flip: bool = False) -> Tensor:
        """Predict the full (preprocessed) image at once.

        Returns:
            (N, C, H, W) prediction at the input size.
        """
        return self._predict_crop(inputs, batch_img_metas, flip)

    def slide_inference(self, inputs: Tensor, batch_img_metas: List[dict],
                        flip: bool = False) -> Tensor:
        """Predict overlapping ``crop_size`` windows moved by ``stride`` and
        average where they overlap (windows are clamped inside the image; an
        image smaller than the crop is predicted whole).

        Returns:
            (N, C, H, W) prediction at the input size.
        """
        h_stride, w_stride = self.test_cfg['stride']
        h_crop, w_crop = self.test_cfg['crop_size']
        batch_size, _, h_img, w_img = inputs.shape
        h_grids = max(h_img - h_crop + h_stride - 1, 0) // h_stride + 1
        w_grids = max(w_img - w_crop + w_stride - 1, 0) // w_stride + 1
        preds = inputs.new_zeros((batch_size, self.out_channels, h_img, w_img))
        count = inputs.new_zeros((batch_size, 1, h_img, w_img))
        for h_idx in range(h_grids):
            for w_idx in range(w_grids):
                y2 = min(h_idx * h_stride + h_crop, h_img)
                x2 = min(w_idx * w_stride + w_crop, w_img)
                y1, x1 = max(y2 - h_crop, 0), max(x2 - w_crop, 0)
                preds[:, :, y1:y2, x1:x2] += self._predict_crop(
                    inputs[:, :, y1:y2, x1:x2], batch_img_metas, flip)
                count[:, :, y1:y2, x1:x2] += 1
        return preds / count

    def inference(self, inputs: Tensor, batch_img_metas: List[dict]) -> Tensor:
        """Run the ``test_cfg`` mode.

        Args:
            inputs: (N, 3, H, W) preprocessed images.
            batch_img_metas: Image meta of each sample.

        Returns:
            (N, C, H, W) raw prediction at the input size.
        """
        cfg = self.test_cfg or {}
        self._check_test_cfg(cfg)
        mode = cfg.get('mode', 'whole')
        flip = bool(cfg.get('flip', False)) or mode == 'slide_flip'
        if mode == 'whole':
            return self.whole_inference(inputs, batch_img_metas, flip)
        return self.slide_inference(inputs, batch_img_metas, flip)

    def postprocess_result(self,
                           depth: Tensor,
                           data_samples: OptSampleList = None
                           ) -> SampleList:
        """Undo padding and pipeline flips, resize to ``ori_shape``.

        Args:
            depth: (N, C, H, W) prediction at the input size.
            data_samples: Samples whose meta gives ``ori_shape``,
                ``padding_size`` and ``flip`` / ``flip_direction``; None to
                return predictions at the input size.

        Returns:
            The samples with ``pred_depth_map`` (1, h, w) or
            ``pred_normal_map`` (3, h, w, unit vectors) set.
        """
        N = depth.shape[0]
        if data_samples is None:
            data_samples = [SegDataSample() for _ in range(N)]
            metas: List[Optional[dict]] = [None] * N
        else:
            metas = [s.metainfo for s in data_samples]
        for i, meta in enumerate(metas):
            self._set_prediction(data_samples[i],
                                 self._postprocess_one(depth[i:i + 1], meta))
        return data_samples

    @staticmethod
    def crop_padding(pred: Tensor, meta: dict) -> Tensor:
        """Cut the pipeline's (``img_padding_size``) or else the
        preprocessor's (``padding_size``) padding, (left, right, top,
        bottom), off a (1, C, H, W) prediction."""
        H, W = pred.shape[-2:]
        left, right, top, bottom = meta.get(
            'img_padding_size', meta.get('padding_size', [0] * 4))
        return pred[:, :, top:H - bottom, left:W - right]

    def _postprocess_one(self, pred: Tensor,
                         meta: Optional[dict]) -> Tensor:
        """(1, C, H, W) prediction -> (C, h, w) at ``ori_shape``: crop the
        padding, undo a pipeline flip, resize bilinearly; normals are then
        L2-normalised."""
        if meta is not None:
            pred = self.crop_padding(pred, meta)
            if meta.get('flip', False):
                pred = self.unflip(pred,
                                    meta.get('flip_direction', 'horizontal'))
            if 'ori_shape' in meta:
                pred = resize(pred, size=tuple(meta['ori_shape'][:2]),
                              mode='bilinear',
                              align_corners=self.align_corners,
                              warning=False)
        pred = pred[0]
        if self.task == 'normal':
            pred = F.normalize(pred, dim=0, eps=1e-12)
        return pred

    def _set_prediction(self, sample: SegDataSample, pred: Tensor) -> None:
        """Store the (C, h, w) prediction in ``sample``."""
        sample.set_data({self.pred_key: PixelData(data=pred)})
