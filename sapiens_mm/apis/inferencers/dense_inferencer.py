"""Dense tasks on whole images: body-part segmentation, depth, normals, and
Sapiens2's pointmaps, albedo and human matting."""
import os.path as osp
from typing import List, Optional, Sequence, Union

import numpy as np
import torch

from sapiens_mm.deploy.runtime import postprocess_dense
from sapiens_mm.tasks import DENSE_TASKS
from sapiens_mm.utils.matting import (alpha_to_png, composite,
                                      matting_cutout, parse_color)
from sapiens_mm.visualization import (
    add_caption,
    colorize_albedo,
    draw_depth,
    draw_normal,
    draw_seg,
    matting_key,
)

from .base_task_inferencer import BaseTaskInferencer
from .utils.sources import Frame, Source
from .utils.writers import write_npy, write_png

__all__ = ['DenseInferencer', 'DENSE_TASKS']

#: The background a matte is composited onto when none is given: green
#: screen (RGB).
DEFAULT_BACKGROUND = (0, 177, 64)


def matting_background(background) -> Union[tuple, np.ndarray]:
    """An RGB tuple, or a BGR image, from a ``background`` option: None
    (green screen), a colour (name, ``#RRGGBB``, ``R,G,B`` or a 3-tuple), an
    image file or a (H, W, 3) BGR uint8 array.

    Raises:
        ValueError: A string that is neither a colour nor a readable image
            (the message says what is accepted).
    """
    if background is None:
        return DEFAULT_BACKGROUND
    if isinstance(background, np.ndarray):
        return background
    if isinstance(background, (tuple, list)) and len(background) == 3:
        return tuple(int(c) for c in background)
    text = str(background)
    if osp.isfile(text):
        from sapiens_mm.utils.image_io import read_image
        return read_image(text)
    return parse_color(text)


class DenseInferencer(BaseTaskInferencer):
    """Sapiens seg (``EncoderDecoder``), depth or normal
    (``SapiensDenseEstimator``), and Sapiens2 normal, pointmap, albedo or
    matting (``Sapiens2DenseEstimator``) on whole images, at the original
    resolution, as mmseg's ``MMSegInferencer``.

    Arguments and call: see :class:`BaseTaskInferencer`. The predictions
    are one array per image (:meth:`to_prediction`); ``pred_out_dir``
    gets their ``.npy`` files (and seg label PNGs; for matting the alpha
    PNG, 8-bit or ``alpha_bits=16``, and the RGBA cut-out),
    ``vis_out_dir`` the drawings (:meth:`draw`; a matte composited onto
    ``background``: a colour or an image, green screen by default).

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
    visualize_kwargs = BaseTaskInferencer.visualize_kwargs | {'background'}
    postprocess_kwargs = BaseTaskInferencer.postprocess_kwargs | {
        'alpha_bits'}

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
            # Sapiens2 normal / pointmap / albedo / matting: the
            # estimator's steps
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
        vectors, pointmaps (H, W, 3) float32 metric camera-frame XYZ,
        albedo (H, W, 3) float32 RGB in [0, 1] or a matte (H, W, 4) float32
        in [0, 1]: the pre-multiplied foreground RGB, then alpha."""
        if self.task == 'seg':
            return sample.pred_sem_seg.data[0].cpu().numpy().astype(np.uint8)
        if self.task == 'depth':
            return sample.pred_depth_map.data[0].float().cpu().numpy(
            ).astype(np.float32)
        key = dict(pointmap='pred_pointmap', albedo='pred_albedo_map',
                   matting='pred_matting').get(self.task, 'pred_normal_map')
        return sample.get(key).data.float().cpu().numpy().transpose(
            1, 2, 0).astype(np.float32)

    def to_arrays(self, samples: list) -> List[np.ndarray]:
        """:meth:`to_prediction` of each data sample."""
        return [self.to_prediction(s) for s in samples]

    def write_prediction(self, sample, prediction: np.ndarray,
                         pred_out_dir: str, alpha_bits: int = 8) -> None:
        """``<pred_out_dir>/<output_name>.npy`` (the array; see
        :meth:`to_prediction`), for seg also ``<output_name>.png`` (the
        labels as a grey PNG), for matting also ``<output_name>_alpha.png``
        (alpha, ``alpha_bits`` 8 or 16) and ``<output_name>_rgba.png`` (the
        RGBA cut-out)."""
        base = osp.join(pred_out_dir, sample.metainfo['output_name'])
        write_npy(base + '.npy', prediction)
        if self.task == 'seg':
            write_png(base + '.png', prediction)
        elif self.task == 'matting':
            write_matting_files(base, prediction, alpha_bits)

    def draw(self,
             image: np.ndarray,
             pred: np.ndarray,
             foreground: Optional[np.ndarray] = None,
             background=None) -> np.ndarray:
        """BGR drawing of one prediction: part colours over the image with a
        legend (seg), an inferno depth map with its colour bar (depth,
        relative; the Z of a pointmap, in metres), RGB normals with their
        orientation key, or the albedo (black outside ``foreground`` when
        given); the keys are panels on the right of the image. A matte is
        composited onto ``background`` (see :func:`matting_background`;
        green screen by default), with a key of how alpha blends. Below
        them a caption names the model (:meth:`caption`).

        Raises:
            ValueError: ``background`` for a model that is not a matting
                model.
        """
        if self.task == 'matting':
            bg = matting_background(background)
            picture = composite(pred[..., :3], pred[..., 3], bg)
            key = matting_key(picture.shape[0], bg, picture.shape[1])
            return add_caption(np.concatenate([picture, key], axis=1),
                               self.caption())
        if background is not None:
            raise ValueError(f'background is for matting models; this is a '
                             f'{self.task} model.')
        if self.task == 'seg':
            picture = draw_seg(image, pred, self.dataset_meta)
        elif self.task == 'depth':
            picture = draw_depth(pred, foreground)
        elif self.task == 'pointmap':
            picture = draw_depth(pred[..., 2], foreground, metric=True)
        elif self.task == 'albedo':
            picture = colorize_albedo(pred, foreground)
        else:
            picture = draw_normal(pred, foreground)
        return add_caption(picture, self.caption())


def write_matting_files(base: str, matte: np.ndarray,
                        alpha_bits: int = 8) -> dict:
    """Write a matte's user files next to ``base``: ``<base>_alpha.png``
    (grey, ``alpha_bits`` 8 or 16) and ``<base>_rgba.png`` (the RGBA
    cut-out, foreground un-pre-multiplied).

    Args:
        base: Path without suffix.
        matte: (H, W, 4) float32 (pre-multiplied foreground RGB, alpha).
        alpha_bits: 8 or 16.

    Returns:
        ``{'matting_alpha': path, 'matting_rgba': path}``.
    """
    files = dict(matting_alpha=base + '_alpha.png',
                 matting_rgba=base + '_rgba.png')
    write_png(files['matting_alpha'], alpha_to_png(matte[..., 3],
                                                   alpha_bits))
    write_png(files['matting_rgba'], matting_cutout(matte[..., :3],
                                                    matte[..., 3]))
    return files
