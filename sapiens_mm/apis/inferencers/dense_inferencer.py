"""Dense tasks on whole images: body-part segmentation, depth, normals."""
from typing import List, Optional, Sequence

import numpy as np
import torch

from sapiens_mm.visualization import colorize_depth, colorize_normal, draw_seg

from .base_task_inferencer import BaseTaskInferencer

__all__ = ['DenseInferencer']


class DenseInferencer(BaseTaskInferencer):
    """Sapiens seg (``EncoderDecoder``), depth or normal
    (``SapiensDenseEstimator``) on whole images, at the original
    resolution. Arguments: see :class:`BaseTaskInferencer`."""

    @property
    def output_layer(self) -> torch.nn.Module:
        return self.model.decode_head.conv_seg

    def pipeline_input_size(self) -> Optional[tuple]:
        size = [
            s.scale for s in self.pipeline.transforms
            if type(s).__name__ == 'Resize' and not s.keep_ratio
        ]
        return tuple(size[0]) if size else None

    def decode_exported(self, output, data_samples: list) -> list:
        from sapiens_mm.deploy import postprocess_dense
        return postprocess_dense(
            self.task, output, self.model.input_size, data_samples,
            bool(self.model.meta.get('resize_align_corners')))

    # ------------------------------------------------------------- steps
    def preprocess_images(self, images: Sequence[np.ndarray]) -> List[dict]:
        """The test pipeline on (H, W, 3) uint8 BGR images (model-free)."""
        return self.preprocess([dict(img=img) for img in images])

    def postprocess(self, samples: list) -> List[np.ndarray]:
        """Per image: seg (H, W) uint8 labels, depth (H, W) float32 or
        normals (H, W, 3) float32 unit vectors, at the original size."""
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
        return [
            s.pred_normal_map.data.float().cpu().numpy().transpose(
                1, 2, 0).astype(np.float32) for s in samples
        ]

    def visualize(self,
                  image: np.ndarray,
                  pred: np.ndarray,
                  foreground: Optional[np.ndarray] = None) -> np.ndarray:
        """BGR drawing of one prediction: part colours over the image with a
        legend (seg), an inferno depth map or RGB normals (black outside
        ``foreground`` when given)."""
        if self.task == 'seg':
            return draw_seg(image, pred, self.dataset_meta)
        if self.task == 'depth':
            return colorize_depth(pred, foreground)
        return colorize_normal(pred, foreground)
