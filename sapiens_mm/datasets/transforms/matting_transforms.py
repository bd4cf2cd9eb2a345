"""Pipeline transforms for human matting: alpha, foreground and background.

Loading puts these float32 arrays in ``results`` and lists them in
``seg_fields``, so mmseg's crops and flips move them with the image pixel
for pixel:

* ``gt_alpha``: (H, W) alpha in [0, 1];
* ``gt_fg``: (H, W, 3) foreground RGB in [0, 1] (optional);
* ``gt_bg``: (H, W, 3) background RGB in [0, 1] (optional).

Resizing must keep soft alpha soft, so matting pipelines resize with
:class:`MattingResize` (bilinear for these fields, where mmseg's ``Resize``
uses nearest), also inside ``RandomResize(resize_type='MattingResize')``.
:class:`GenerateMattingTarget` comes last in training and packs alpha, the
image, foreground and background into the one ``gt_matting`` target the
losses read.
"""
from typing import Optional

import mmcv
import numpy as np
from mmcv.transforms import BaseTransform
from mmengine import fileio
from mmseg.datasets.transforms import Resize
from mmseg.registry import TRANSFORMS

__all__ = ['LoadMattingAnnotations', 'MattingResize',
           'GenerateMattingTarget', 'MATTING_FIELDS', 'read_alpha']

#: The soft (bilinearly resized) matting fields.
MATTING_FIELDS = ('gt_alpha', 'gt_fg', 'gt_bg')


def read_alpha(data: bytes, source: str = 'alpha') -> np.ndarray:
    """Decode an alpha matte file (8- or 16-bit PNG, grey or with an alpha
    channel, or any image cv2 reads) to (H, W) float32 in [0, 1].

    A grey image is the alpha itself; an image with 4 channels gives its
    alpha channel; 3 equal channels are read as grey.

    Raises:
        ValueError: The bytes are no image, or a 3-channel image whose
            channels differ (a photo, not a matte).
    """
    img = mmcv.imfrombytes(data, flag='unchanged', backend='cv2')
    if img is None:
        raise ValueError(f'Cannot decode the alpha matte {source}.')
    scale = 65535.0 if img.dtype == np.uint16 else (
        255.0 if img.dtype == np.uint8 else 1.0)
    if img.ndim == 3:
        if img.shape[2] == 4:
            img = img[..., 3]
        elif img.shape[2] == 3 and (img == img[..., :1]).all():
            img = img[..., 0]
        elif img.shape[2] == 1:
            img = img[..., 0]
        else:
            raise ValueError(
                f'{source}: an alpha matte must be a grey image (or have an '
                f'alpha channel), got {img.shape[2]} differing channels.')
    return np.clip(img.astype(np.float32) / scale, 0.0, 1.0)


def _read_rgb(data: bytes, source: str) -> np.ndarray:
    img = mmcv.imfrombytes(data, flag='color', channel_order='rgb',
                           backend='cv2')
    if img is None:
        raise ValueError(f'Cannot decode the image {source}.')
    scale = 65535.0 if img.dtype == np.uint16 else 255.0
    return img.astype(np.float32) / scale


def _add_seg_field(results: dict, key: str) -> None:
    fields = results.setdefault('seg_fields', [])
    if key not in fields:
        fields.append(key)


@TRANSFORMS.register_module()
class LoadMattingAnnotations(BaseTransform):
    """Load the alpha matte (and the optional foreground / background) of a
    sample.

    Reads ``results['alpha_path']`` with :func:`read_alpha`, and
    ``results['fg_path']`` / ``results['bg_path']`` (colour images) when
    present. Files whose size differs from the original image
    (``ori_shape``) are resized to it bilinearly. A bare image (no
    ``alpha_path``: mmseg's inference APIs) passes through unchanged.

    Put it before the geometric transforms in training pipelines, and after
    the resize in test pipelines (the prediction is returned at the
    original size, where the metric compares it with the matte).

    Added keys: ``gt_alpha``, ``gt_fg``, ``gt_bg`` (see the module
    docstring), appended to ``seg_fields``.

    Args:
        backend_args: mmengine file backend arguments.
    """

    def __init__(self, backend_args: Optional[dict] = None) -> None:
        self.backend_args = backend_args

    def transform(self, results: dict) -> dict:
        """Load the files named in ``results``."""
        if not results.get('alpha_path'):
            if results.get('fg_path') or results.get('bg_path'):
                raise KeyError('LoadMattingAnnotations needs alpha_path '
                               'with fg_path / bg_path; build the samples '
                               'with MattingFolderDataset.')
            return results
        shape = results.get('ori_shape')
        if shape is None and results.get('img') is not None:
            shape = results['img'].shape[:2]
        for key, field in (('alpha_path', 'gt_alpha'), ('fg_path', 'gt_fg'),
                           ('bg_path', 'gt_bg')):
            path = results.get(key)
            if not path:
                continue
            data = fileio.get(path, backend_args=self.backend_args)
            array = (read_alpha(data, path) if field == 'gt_alpha' else
                     _read_rgb(data, path))
            if shape is not None and array.shape[:2] != tuple(shape[:2]):
                array = mmcv.imresize(array, (int(shape[1]), int(shape[0])),
                                      interpolation='bilinear')
            results[field] = array
            _add_seg_field(results, field)
        return results

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}()'


@TRANSFORMS.register_module()
class MattingResize(Resize):
    """mmseg ``Resize`` that resizes the matting fields (``gt_alpha``,
    ``gt_fg``, ``gt_bg``) bilinearly, so a soft edge stays soft and stays
    on the image's edge; other ``seg_fields`` are resized with nearest as
    upstream. Arguments are those of ``Resize`` (``scale`` (w, h),
    ``keep_ratio``...); use it in ``RandomResize`` as
    ``resize_type='MattingResize'``.
    """

    def _resize_seg(self, results: dict) -> None:
        soft = [k for k in results.get('seg_fields', [])
                if k in MATTING_FIELDS and results.get(k) is not None]
        others = [k for k in results.get('seg_fields', []) if k not in soft]
        for key in soft:
            if self.keep_ratio:
                array = mmcv.imrescale(results[key], results['scale'],
                                       interpolation='bilinear',
                                       backend=self.backend)
            else:
                array = mmcv.imresize(results[key], results['scale'],
                                      interpolation='bilinear',
                                      backend=self.backend)
            results[key] = np.clip(array, 0.0, 1.0)
        fields = results.get('seg_fields', [])
        results['seg_fields'] = others
        try:
            super()._resize_seg(results)
        finally:
            results['seg_fields'] = fields


@TRANSFORMS.register_module()
class GenerateMattingTarget(BaseTransform):
    """Pack alpha, the image, foreground and background into
    ``gt_matting``, the target of
    :class:`~sapiens_mm.models.losses.MattingLoss`.

    ``gt_matting`` is (H, W, 10) float32: alpha, the image as RGB in
    [0, 1] (the pipeline's ``img`` is BGR), the foreground and the
    background RGB (-1 when the sample has none). Run it last, after every
    geometric and photometric step, so the image in the target is the one
    the model sees.

    Added key: ``gt_matting`` (in ``seg_fields``).

    Raises:
        KeyError: No ``gt_alpha`` (put LoadMattingAnnotations first).
        ValueError: The fields and the image are not aligned.
    """

    def transform(self, results: dict) -> dict:
        """Write ``gt_matting`` (a bare image passes through)."""
        if results.get('gt_alpha') is None:
            if not results.get('alpha_path'):
                return results
            raise KeyError('GenerateMattingTarget needs gt_alpha; put '
                           'LoadMattingAnnotations before it.')
        img = results['img']
        h, w = img.shape[:2]
        parts = [results['gt_alpha'][..., None],
                 img[..., ::-1].astype(np.float32) / 255.0]
        for key in ('gt_fg', 'gt_bg'):
            value = results.get(key)
            parts.append(np.full((h, w, 3), -1.0, np.float32)
                         if value is None else value)
        for part, name in zip(parts, ('gt_alpha', 'img', 'gt_fg', 'gt_bg')):
            if part.shape[:2] != (h, w):
                raise ValueError(
                    f'{name} {part.shape[:2]} and the image {(h, w)} are '
                    'not aligned; transform them together (matting fields '
                    'stay in seg_fields; resize with MattingResize).')
        results['gt_matting'] = np.concatenate(parts, axis=-1).astype(
            np.float32)
        _add_seg_field(results, 'gt_matting')
        return results
