"""Aspect-keeping resize + centre padding (Sapiens2 dense test transform)."""
from typing import Tuple

import cv2
import numpy as np
from mmcv.transforms import BaseTransform
from mmseg.registry import TRANSFORMS

__all__ = ['ResizePadImage']


@TRANSFORMS.register_module()
class ResizePadImage(BaseTransform):
    """Fit the image into ``size`` keeping its aspect ratio, centre-pad it.

    The official Sapiens2 normal / pointmap / albedo test transform: with
    ``scale = min(W / w, H / h)`` the image is resized to
    ``(int(w * scale), int(h * scale))`` with bilinear interpolation
    (``cv2.INTER_LINEAR``), then padded with ``pad_val`` to ``(H, W)``,
    ``(W - new_w) // 2`` columns on the left and ``(H - new_h) // 2`` rows on
    top, the rest right and bottom. After normalisation a zero pad is
    ``-mean / std``, as officially. ``seg_fields`` arrays (training
    pipelines) are resized with nearest interpolation and padded with
    ``seg_pad_val`` (0: background / invalid for every dense target).

    Modified keys: ``img``, ``img_shape``, the ``seg_fields``. Added keys:
    ``img_padding_size`` (left, right, top, bottom; the estimator crops it
    off the prediction), ``scale_factor`` (w, h), ``keep_ratio``.

    Args:
        size: Output (H, W). Defaults to (1024, 768).
        pad_val: Image padding value. Defaults to 0.
        seg_pad_val: Padding value of ``seg_fields``. Defaults to 0.
    """

    def __init__(self, size: Tuple[int, int] = (1024, 768),
                 pad_val: float = 0, seg_pad_val: float = 0) -> None:
        if len(size) != 2 or min(size) <= 0:
            raise ValueError(f'size must be a positive (H, W), got {size}.')
        self.size = (int(size[0]), int(size[1]))
        self.pad_val = pad_val
        self.seg_pad_val = seg_pad_val

    def _fit(self, array: np.ndarray, new_wh, pads, interpolation,
             value) -> np.ndarray:
        resized = cv2.resize(array, new_wh, interpolation=interpolation)
        if resized.ndim < array.ndim:  # cv2 drops a trailing 1-channel axis
            resized = resized[..., None]
        left, right, top, bottom = pads
        widths = [(top, bottom), (left, right)] + [(0, 0)] * (
            resized.ndim - 2)
        return np.pad(resized, widths, constant_values=value)

    def transform(self, results: dict) -> dict:
        """Resize and pad ``img`` (and the ``seg_fields``)."""
        img = results['img']
        h, w = img.shape[:2]
        H, W = self.size
        scale = min(W / w, H / h)
        new_w, new_h = int(w * scale), int(h * scale)
        left, top = (W - new_w) // 2, (H - new_h) // 2
        pads = (left, W - new_w - left, top, H - new_h - top)
        results['img'] = self._fit(img, (new_w, new_h), pads,
                                   cv2.INTER_LINEAR, self.pad_val)
        for key in results.get('seg_fields', []):
            if results.get(key) is not None:
                results[key] = self._fit(results[key], (new_w, new_h), pads,
                                         cv2.INTER_NEAREST, self.seg_pad_val)
        results['img_shape'] = (H, W)
        results['img_padding_size'] = pads
        results['scale_factor'] = (new_w / w, new_h / h)
        results['keep_ratio'] = True
        return results

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(size={self.size}, pad_val='
                f'{self.pad_val}, seg_pad_val={self.seg_pad_val})')
