"""Horizontal flip that swaps left / right body-part labels."""
from typing import Optional, Sequence

import mmcv
import numpy as np
from mmcv.transforms import RandomFlip
from mmseg.registry import TRANSFORMS

from ..metainfo import BodyPartVocab, load_body_part_classes

__all__ = ['BodyPartRandomFlip']


@TRANSFORMS.register_module()
class BodyPartRandomFlip(RandomFlip):
    """Random horizontal flip of image and mask that also swaps the labels
    of mirrored parts (left arm <-> right arm, ...).

    After the flip a pixel that was ``Left_Upper_Arm`` sits at the mirrored
    column and is labelled ``Right_Upper_Arm``. The pairs come from the
    package vocabulary (``flip_swap_pairs`` in ``body_part_classes.json``)
    unless given explicitly.

    Required keys: ``img``; optional ``gt_seg_map``. Modified keys: ``img``,
    ``gt_seg_map``. Added keys: ``flip``, ``flip_direction``,
    ``swap_seg_labels``.

    Args:
        prob: Flip probability. Defaults to 0.5.
        vocab: Vocabulary whose swap pairs are used: ``'goliath_28'``,
            ``'lip_cihp_20'`` or ``'dome_29'``. Defaults to
            ``'goliath_28'``.
        swap_seg_labels: Explicit ``[(left_id, right_id), ...]`` pairs,
            used instead of the vocabulary's.
    """

    def __init__(self,
                 prob: float = 0.5,
                 vocab: BodyPartVocab = 'goliath_28',
                 swap_seg_labels: Optional[Sequence[Sequence[int]]] = None
                 ) -> None:
        if swap_seg_labels is None:
            swap_seg_labels = load_body_part_classes(vocab)['flip_swap_pairs']
        pairs = [tuple(int(i) for i in p) for p in swap_seg_labels]
        seen = set()
        for pair in pairs:
            if len(pair) != 2 or pair[0] == pair[1] or seen & set(pair):
                raise ValueError(
                    f'swap_seg_labels must be pairs of two different ids, '
                    f'each id in one pair only; got {swap_seg_labels}.')
            seen.update(pair)
        self.vocab = vocab
        super().__init__(
            prob=float(prob), direction='horizontal', swap_seg_labels=pairs)

    def _flip_seg_map(self, seg_map: np.ndarray,
                      direction: str) -> np.ndarray:
        """Mirror ``seg_map`` (H, W) and swap the paired labels.

        Returns a new array; the input is left unchanged.
        """
        flipped = mmcv.imflip(seg_map, direction=direction)
        out = flipped.copy()  # C-contiguous, independent of the input
        for left, right in self.swap_seg_labels:
            out[flipped == left] = right
            out[flipped == right] = left
        return out

    def __repr__(self) -> str:
        return (f'{type(self).__name__}(prob={self.prob}, '
                f'swap_seg_labels={self.swap_seg_labels})')
