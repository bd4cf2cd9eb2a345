"""Dense tasks on whole images: body-part segmentation, depth, normals, and
Sapiens2's pointmaps and albedo."""
from typing import List, Optional, Sequence

import numpy as np
import torch

from sapiens_mm.visualization import (colorize_albedo, colorize_depth,
                                      colorize_normal, draw_seg)

from .base_task_inferencer import BaseTaskInferencer

__all__ = ['DenseInferencer']


class DenseInferencer(BaseTaskInferencer):
    """Sapiens seg (``EncoderDecoder``), depth or normal
    (``SapiensDenseEstimator``), and Sapiens2 normal, pointmap or albedo
    (``Sapiens2DenseEstimator``) on whole images, at the original
    resolution. Arguments: see :class:`BaseTaskInferencer`."""

    @property
    def output_layer(self) -> torch.nn.Module:
        head = self.model.decode_head
        # Sapiens2 heads name their output conv (conv_normal, conv_pointmap..)
        return getattr(head, 'final_layer', None) or head.conv_seg

    def pipeline_input_size(self) -> Optional[tuple]:
        from mmseg.datasets.transforms import Resize

        from sapiens_mm.datasets.transforms import ResizePadImage
        for step in self.pipeline.transforms:
            if isinstance(step, ResizePadImage):
                return tuple(step.size[::-1])
            if isinstance(step, Resize) and not step.keep_ratio:
                return tuple(step.scale)
        return None

    def decode_exported(self, output, data_samples: list) -> list:
        align_corners = bool(self.model.meta.get('resize_align_corners'))
        if str(self.cfg.model.get('type', '')).endswith(
                'Sapiens2DenseEstimator'):
            # Sapiens2 normal / pointmap / albedo: the estimator's steps
            from sapiens_mm.models.estimators import (SapiensDenseEstimator,
                                                      finish_prediction,
                                                      prediction_fields)
            out = torch.from_numpy(np.asarray(output, np.float32))
            for i, sample in enumerate(data_samples):
                meta = sample.metainfo
                pred = SapiensDenseEstimator.crop_padding(out[i:i + 1], meta)
                sample.set_data(prediction_fields(self.task, finish_prediction(
                    self.task, pred, meta['ori_shape'], align_corners)))
            return list(data_samples)
        from sapiens_mm.deploy import postprocess_dense
        return postprocess_dense(
            self.task, output, self.model.input_size, data_samples,
            align_corners)

    # ------------------------------------------------------------- steps
    def preprocess_images(self, images: Sequence[np.ndarray]) -> List[dict]:
        """The test pipeline on (H, W, 3) uint8 BGR images (model-free)."""
        return self.preprocess([dict(img=img) for img in images])

    def postprocess(self, samples: list) -> List[np.ndarray]:
        """Per image: seg (H, W) uint8 labels, depth (H, W) float32,
        normals (H, W, 3) float32 unit vectors, pointmaps (H, W, 3) float32
        metric camera-frame XYZ or albedo (H, W, 3) float32 RGB in [0, 1],
        at the original size."""
        if self.task == 'seg':
            return [
                s.pred_sem_seg.data[0].cpu().numpy().astype(np.uint8)
                for s in samples
            ]
        if self.task == 'depth':
            return [
                s.pred_depth_map.data[0].float().cpu().numpy().astype(
                    np.float32) for s in samples
            ]
        key = dict(pointmap='pred_pointmap',
                   albedo='pred_albedo_map').get(self.task, 'pred_normal_map')
        return [
            s.get(key).data.float().cpu().numpy().transpose(1, 2, 0).astype(
                np.float32) for s in samples
        ]

    def visualize(self,
                  image: np.ndarray,
                  pred: np.ndarray,
                  foreground: Optional[np.ndarray] = None) -> np.ndarray:
        """BGR drawing of one prediction: part colours over the image with a
        legend (seg), an inferno depth map (depth, and the Z of a pointmap),
        RGB normals or the albedo (black outside ``foreground`` when
        given)."""
        if self.task == 'seg':
            return draw_seg(image, pred, self.dataset_meta)
        if self.task == 'depth':
            return colorize_depth(pred, foreground)
        if self.task == 'pointmap':
            return colorize_depth(pred[..., 2], foreground)
        if self.task == 'albedo':
            return colorize_albedo(pred, foreground)
        return colorize_normal(pred, foreground)
