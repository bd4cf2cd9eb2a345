"""Additive Gaussian pixel noise (Sapiens2 seg / normal / albedo)."""
from typing import Tuple

import numpy as np
from mmcv.transforms import BaseTransform
from mmseg.registry import TRANSFORMS

__all__ = ['RandomGaussianNoise']


@TRANSFORMS.register_module()
class RandomGaussianNoise(BaseTransform):
    """With probability ``prob``, add zero-mean Gaussian noise to ``img``.

    The standard deviation (in 0-255 pixel units) is drawn uniformly from
    ``std_range`` for each image; the result is rounded and clipped to the
    image's dtype range (uint8: 0-255). Targets are not changed.

    Args:
        prob: Probability of adding noise. Defaults to 0.3 (official).
        std_range: (low, high) of the noise standard deviation. Defaults to
            (2, 10).
    """

    def __init__(self, prob: float = 0.3,
                 std_range: Tuple[float, float] = (2.0, 10.0)) -> None:
        if not 0 <= prob <= 1 or len(std_range) != 2 or \
                not 0 <= std_range[0] <= std_range[1]:
            raise ValueError(f'prob must lie in [0, 1] and std_range be '
                             f'(low, high) with 0 <= low <= high; got '
                             f'prob={prob}, std_range={std_range}.')
        self.prob = float(prob)
        self.std_range = (float(std_range[0]), float(std_range[1]))

    def transform(self, results: dict) -> dict:
        """Add the noise to ``results['img']`` (maybe)."""
        if np.random.rand() >= self.prob:
            return results
        img = results['img']
        std = np.random.uniform(*self.std_range)
        noisy = img.astype(np.float32) + np.random.normal(0, std, img.shape)
        if np.issubdtype(img.dtype, np.integer):
            info = np.iinfo(img.dtype)
            noisy = np.clip(np.round(noisy), info.min, info.max)
        results['img'] = noisy.astype(img.dtype)
        return results

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(prob={self.prob}, '
                f'std_range={self.std_range})')
