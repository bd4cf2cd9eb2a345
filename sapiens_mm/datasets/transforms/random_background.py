"""Paste the foreground of an image onto a random background picture."""
import os
import os.path as osp
from typing import List, Sequence, Union

import mmcv
import numpy as np
from mmcv.transforms import BaseTransform
from mmseg.registry import TRANSFORMS

__all__ = ['RandomBackground']


@TRANSFORMS.register_module()
class RandomBackground(BaseTransform):
    """Replace the background of ``img`` by a random image from a folder.

    With probability ``prob`` a picture is drawn from ``background_root``,
    resized to the image height (keeping its aspect ratio), centre-cropped
    to the image width and resized to the exact image size; then every
    background pixel of ``img`` is replaced by it. Foreground pixels (where
    the foreground field is > 0) and every other field (masks, depth,
    normals) are left unchanged. The official transform also applied a
    colour transfer (``libcom``); this one does not.

    The foreground is read from the first of ``foreground_keys`` present in
    the results: ``gt_seg_map`` for segmentation (ignore label 255 counts as
    foreground), or the mask field of a depth / normal pipeline. For a
    (H, W, C) mask, channel 0 is used. So the transform must come after the
    step that loads that field.

    The folder is checked when the transform is built (at start-up): a
    missing folder or one without images raises ``FileNotFoundError``
    unless ``prob`` is 0.

    Required keys: ``img`` and one of ``foreground_keys``.
    Modified keys: ``img``.

    Args:
        prob: Probability of replacing the background. Defaults to 0.5.
        background_root: Folder searched (recursively) for background
            images, e.g. COCO images without people.
            Defaults to ``'data/coco/no_humans'``.
        foreground_keys: Result key, or keys tried in order, holding the
            foreground map. Defaults to ``'gt_seg_map'``.
        suffixes: Image file suffixes. Defaults to ('.jpg', '.jpeg', '.png').
    """

    def __init__(self,
                 prob: float = 0.5,
                 background_root: str = 'data/coco/no_humans',
                 foreground_keys: Union[str, Sequence[str]] = 'gt_seg_map',
                 suffixes: Sequence[str] = ('.jpg', '.jpeg', '.png')) -> None:
        if not 0 <= prob <= 1:
            raise ValueError(f'RandomBackground: prob must be in [0, 1], '
                             f'got {prob}.')
        self.prob = float(prob)
        self.background_root = background_root
        self.foreground_keys = ((foreground_keys, ) if isinstance(
            foreground_keys, str) else tuple(foreground_keys))
        self.suffixes = tuple(s.lower() for s in suffixes)
        self.files: List[str] = []
        if self.prob > 0:
            self.files = self._find_images()

    def _find_images(self) -> List[str]:
        root = self.background_root
        hint = ('Put background pictures without people there (for example '
                'COCO images with no person), point background_root at such '
                'a folder, or set prob=0 to train without background '
                'replacement.')
        if not osp.isdir(root):
            raise FileNotFoundError(
                f'RandomBackground: background folder {root!r} (resolved to '
                f'{osp.abspath(root)}) does not exist. {hint}')
        files = sorted(
            osp.join(d, f) for d, _, names in os.walk(root) for f in names
            if osp.splitext(f)[1].lower() in self.suffixes)
        if not files:
            raise FileNotFoundError(
                f'RandomBackground: background folder {osp.abspath(root)} '
                f'has no {"/".join(self.suffixes)} image. {hint}')
        return files

    def _background(self, path: str, height: int, width: int) -> np.ndarray:
        """Load ``path`` as a (height, width, 3) BGR picture."""
        bg = mmcv.imread(path, flag='color')
        if bg is None:
            raise OSError(f'RandomBackground: cannot read image {path}.')
        bh, bw = bg.shape[:2]
        new_w = max(1, int(round(bw * height / bh)))
        bg = mmcv.imresize(bg, (new_w, height))
        if new_w > width:
            left = (new_w - width) // 2
            bg = bg[:, left:left + width]
        return mmcv.imresize(bg, (width, height))

    def _foreground(self, results: dict) -> np.ndarray:
        for key in self.foreground_keys:
            if results.get(key) is not None:
                fg = np.asarray(results[key])
                if fg.ndim == 3:
                    fg = fg[..., 0]
                return fg > 0
        raise KeyError(
            f'RandomBackground needs a foreground map in one of '
            f'{list(self.foreground_keys)}; load it (e.g. LoadAnnotations) '
            'before RandomBackground in the pipeline.')

    def transform(self, results: dict) -> dict:
        """Composite ``img`` over a random background (with ``prob``)."""
        if self.prob == 0 or np.random.rand() >= self.prob:
            return results
        img = results['img']
        height, width = img.shape[:2]
        fg = self._foreground(results)
        if fg.shape != (height, width):
            raise ValueError(
                f'RandomBackground: foreground map shape {fg.shape} differs '
                f'from image shape {(height, width)}; apply it before any '
                'resize or crop that changes only one of them.')
        path = self.files[np.random.randint(len(self.files))]
        bg = self._background(path, height, width)
        if img.ndim == 2:
            bg = mmcv.bgr2gray(bg)
        elif img.shape[2] != 3:
            raise ValueError(f'RandomBackground expects a 3-channel or gray '
                             f'image, got shape {img.shape}.')
        if img.ndim == 3:
            fg = fg[..., None]
        results['img'] = np.where(fg, img, bg.astype(img.dtype))
        return results

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(prob={self.prob}, '
                f'background_root={self.background_root!r}, '
                f'foreground_keys={self.foreground_keys})')
