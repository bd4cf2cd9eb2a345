"""Keypoint and class definitions shipped as package data (``data/``)."""
import json
from functools import lru_cache
from pathlib import Path
from typing import Literal

DATA_DIR = Path(__file__).resolve().parents[1] / 'data'

__all__ = [
    'DATA_DIR', 'load_goliath_keypoints', 'load_body_part_classes',
    'load_keypoint_formats'
]


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


@lru_cache(maxsize=None)
def load_keypoint_formats() -> dict:
    """The keypoint layouts results convert to (COCO-17, COCO-WholeBody-133,
    OpenPose body-18 / hands / face-70): ``layouts`` (name lists),
    ``derived`` and ``goliath_aliases`` (see
    :mod:`sapiens_mm.datasets.keypoint_formats`)."""
    with open(DATA_DIR / 'keypoint_formats.json') as f:
        return json.load(f)
