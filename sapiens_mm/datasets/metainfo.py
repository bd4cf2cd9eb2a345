"""Keypoint and class definitions shipped as package data (``data/``)."""
import json
from functools import lru_cache
from pathlib import Path
from typing import Dict, Literal

DATA_DIR = Path(__file__).resolve().parents[1] / 'data'

__all__ = [
    'DATA_DIR', 'BODY_PART_VOCABS', 'load_goliath_keypoints',
    'load_body_part_classes', 'vocab_for_num_classes', 'load_keypoint_formats'
]

#: Number of classes -> body-part vocabulary in ``body_part_classes.json``.
BODY_PART_VOCABS: Dict[int, str] = {28: 'goliath_28', 20: 'lip_cihp_20'}


@lru_cache(maxsize=None)
def load_goliath_keypoints() -> dict:
    """The 308-keypoint Goliath definition: ``keypoints`` (id, name, color,
    type, swap), ``skeleton``, ``joint_weights``, ``sigmas``, ``groups`` and
    ``coco_wholebody_to_goliath``."""
    with open(DATA_DIR / 'goliath_keypoints_308.json') as f:
        return json.load(f)


@lru_cache(maxsize=None)
def load_body_part_classes(
        vocab: Literal['goliath_28', 'lip_cihp_20'] = 'goliath_28') -> dict:
    """A body-part vocabulary: ``classes``, ``palette``, ``flip_swap_pairs``,
    ``class_weight`` (and ``original_34_classes`` for goliath_28)."""
    with open(DATA_DIR / 'body_part_classes.json') as f:
        data = json.load(f)
    if vocab not in data:
        raise KeyError(f'Unknown vocabulary {vocab!r}; choose from '
                       f'{sorted(data)}.')
    return data[vocab]


def vocab_for_num_classes(num_classes: int) -> str:
    """Body-part vocabulary of a segmentation model with ``num_classes``.

    Raises:
        ValueError: No shipped vocabulary has that many classes.
    """
    if num_classes not in BODY_PART_VOCABS:
        raise ValueError(
            f'No body-part vocabulary has {num_classes} classes; the shipped '
            f'ones have {sorted(BODY_PART_VOCABS)} '
            f'({list(BODY_PART_VOCABS.values())}).')
    return BODY_PART_VOCABS[num_classes]


@lru_cache(maxsize=None)
def load_keypoint_formats() -> dict:
    """The keypoint layouts results convert to (COCO-17, COCO-WholeBody-133,
    OpenPose body-18 / hands / face-70): ``layouts`` (name lists),
    ``derived`` and ``goliath_aliases`` (see
    :mod:`sapiens_mm.datasets.keypoint_formats`)."""
    with open(DATA_DIR / 'keypoint_formats.json') as f:
        return json.load(f)
