"""Dense tasks on whole images: body-part segmentation, depth, normals, and
Sapiens2's pointmaps and albedo."""
import os.path as osp
from typing import List, Optional, Sequence

import numpy as np
import torch

from sapiens_mm.deploy.runtime import postprocess_dense
from sapiens_mm.tasks import DENSE_TASKS
from sapiens_mm.visualization import (
    colorize_albedo,
    draw_depth,
    draw_normal,
    draw_seg,
)

from .base_task_inferencer import BaseTaskInferencer
from .utils.sources import Frame, Source
from .utils.writers import write_npy, write_png

__all__ = ['DenseInferencer', 'DENSE_TASKS']



class DenseInferencer(BaseTaskInferencer):
    """Sapiens seg (``EncoderDecoder``), depth or normal
    (``SapiensDenseEstimator``), and Sapiens2 normal, pointmap or albedo
    (``Sapiens2DenseEstimator``) on whole images, at the original
    resolution, as mmseg's ``MMSegInferencer``.

    Arguments and call: see :class:`BaseTaskInferencer`. The predictions
    are one array per image (:meth:`to_prediction`); ``pred_out_dir``
    gets their ``.npy`` files (and seg label PNGs), ``vis_out_dir`` the
    drawings (:meth:`draw`).

    Example:
        >>> from sapiens_mm.apis import DenseInferencer
        >>> seg = DenseInferencer(
        ...     'configs/seg/goliath/sapiens_0.3b-200e_goliath-1024x768.py',
        ...     'sapiens_0.3b_goliath_best_goliath_mIoU_7673_epoch_194.pth')
        >>> out = seg(['a.jpg', 'b.jpg'], batch_size=2, pred_out_dir='preds')
        >>> out['predictions'][0].shape  # (H, W) uint8 part labels
        (1080, 720)
    """

    supported_tasks = DENSE_TASKS

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
            from sapiens_mm.models.estimators import (
                SapiensDenseEstimator,
                finish_prediction,
                prediction_fields,
            )
            out = torch.from_numpy(np.asarray(output, np.float32))
            for i, sample in enumerate(data_samples):
                meta = sample.metainfo
                pred = SapiensDenseEstimator.crop_padding(out[i:i + 1], meta)
                sample.set_data(prediction_fields(self.task, finish_prediction(
                    self.task, pred, meta['ori_shape'], align_corners)))
            return list(data_samples)
        return postprocess_dense(
            self.task, output, self.model.input_size, data_samples,
            align_corners)

    # ------------------------------------------------------------- steps
    def preprocess(self, inputs: List[Source], batch_size: int = 1):
        """Decode, run the test pipeline and collate ``batch_size`` images
        at a time.

        Args:
            inputs: The images (:meth:`_inputs_to_list`).
            batch_size: Images per batch.

        Yields:
            ``dict(inputs=[...], data_samples=[...])`` of each batch.
        """
        def prepare(frames: List[Frame]) -> dict:
            packed = self.preprocess_images([f.image for f in frames])
            self.name_samples(packed, frames)
            return self.collate_fn(packed)

        return self.chunks(inputs, batch_size, prepare)

    def preprocess_images(self, images: Sequence[np.ndarray]) -> List[dict]:
        """The test pipeline on (H, W, 3) uint8 BGR images (model-free)."""
        return self.run_pipeline([dict(img=img) for img in images])

    def to_prediction(self, sample) -> np.ndarray:
        """One image's prediction at its original size: seg (H, W) uint8
        labels, depth (H, W) float32, normals (H, W, 3) float32 unit
        vectors, pointmaps (H, W, 3) float32 metric camera-frame XYZ or
        albedo (H, W, 3) float32 RGB in [0, 1]."""
        if self.task == 'seg':
            return sample.pred_sem_seg.data[0].cpu().numpy().astype(np.uint8)
        if self.task == 'depth':
            return sample.pred_depth_map.data[0].float().cpu().numpy(
            ).astype(np.float32)
        key = dict(pointmap='pred_pointmap',
                   albedo='pred_albedo_map').get(self.task, 'pred_normal_map')
        return sample.get(key).data.float().cpu().numpy().transpose(
            1, 2, 0).astype(np.float32)

    def to_arrays(self, samples: list) -> List[np.ndarray]:
        """:meth:`to_prediction` of each data sample."""
        return [self.to_prediction(s) for s in samples]

    def write_prediction(self, sample, prediction: np.ndarray,
                         pred_out_dir: str) -> None:
        """``<pred_out_dir>/<output_name>.npy`` (the array; see
        :meth:`to_prediction`), and for seg also ``<output_name>.png`` (the
        labels as a grey PNG)."""
        base = osp.join(pred_out_dir, sample.metainfo['output_name'])
        write_npy(base + '.npy', prediction)
        if self.task == 'seg':
            write_png(base + '.png', prediction)

    def draw(self,
             image: np.ndarray,
             pred: np.ndarray,
             foreground: Optional[np.ndarray] = None) -> np.ndarray:
        """BGR drawing of one prediction: part colours over the image with a
        legend (seg), an inferno depth map with its colour bar (depth,
        relative; the Z of a pointmap, in metres), RGB normals with their
        orientation key, or the albedo (black outside ``foreground`` when
        given). The keys are panels on the right of the image."""
        if self.task == 'seg':
            return draw_seg(image, pred, self.dataset_meta)
        if self.task == 'depth':
            return draw_depth(pred, foreground)
        if self.task == 'pointmap':
            return draw_depth(pred[..., 2], foreground, metric=True)
        if self.task == 'albedo':
            return colorize_albedo(pred, foreground)
        return draw_normal(pred, foreground)
