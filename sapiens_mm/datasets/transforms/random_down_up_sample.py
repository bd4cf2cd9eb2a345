"""Down- then up-sampling of the image (Sapiens2 normal / albedo)."""
from typing import Tuple

import cv2
import numpy as np
from mmcv.transforms import BaseTransform
from mmseg.registry import TRANSFORMS

__all__ = ['RandomDownUpSample']


@TRANSFORMS.register_module()
class RandomDownUpSample(BaseTransform):
    """With probability ``prob``, shrink ``img`` by a factor drawn from
    ``scale_range`` and resize it back (bilinear both ways): the same size,
    less detail, as from a low-resolution camera. Targets are not changed.

    Args:
        prob: Probability. Defaults to 0.2 (official).
        scale_range: (low, high) of the shrink factor, in (0, 1]. Defaults
            to (0.1, 0.7) (official).
    """

    def __init__(self, prob: float = 0.2,
                 scale_range: Tuple[float, float] = (0.1, 0.7)) -> None:
        if not 0 <= prob <= 1 or len(scale_range) != 2 or \
                not 0 < scale_range[0] <= scale_range[1] <= 1:
            raise ValueError(f'prob must lie in [0, 1] and scale_range be '
                             f'(low, high) with 0 < low <= high <= 1; got '
                             f'prob={prob}, scale_range={scale_range}.')
        self.prob = float(prob)
        self.scale_range = (float(scale_range[0]), float(scale_range[1]))

    def transform(self, results: dict) -> dict:
        """Degrade ``results['img']`` (maybe)."""
        if np.random.rand() >= self.prob:
            return results
        img = results['img']
        h, w = img.shape[:2]
        scale = np.random.uniform(*self.scale_range)
        small = cv2.resize(img, (max(1, round(w * scale)),
                                 max(1, round(h * scale))),
                           interpolation=cv2.INTER_LINEAR)
        results['img'] = cv2.resize(small, (w, h),
                                    interpolation=cv2.INTER_LINEAR)
        return results

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(prob={self.prob}, '
                f'scale_range={self.scale_range})')
