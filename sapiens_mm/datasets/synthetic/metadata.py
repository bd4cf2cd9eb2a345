"""Keypoint and body-part metadata used by the synthetic human generator.

Everything is read from the JSON files shipped in ``sapiens_mm/data`` and
looked up *by name*, never by position, so the generator follows the project's
single source of truth for keypoint order and class ids.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Dict, List, Tuple

from ..metainfo import load_body_part_classes, load_goliath_keypoints

#: COCO-17 keypoint names in the standard COCO order.
COCO17_NAMES: Tuple[str, ...] = (
    'nose', 'left_eye', 'right_eye', 'left_ear', 'right_ear',
    'left_shoulder', 'right_shoulder', 'left_elbow', 'right_elbow',
    'left_wrist', 'right_wrist', 'left_hip', 'right_hip', 'left_knee',
    'right_knee', 'left_ankle', 'right_ankle')

#: Standard COCO person skeleton, 1-based keypoint indices.
COCO17_SKELETON: Tuple[Tuple[int, int], ...] = (
    (16, 14), (14, 12), (17, 15), (15, 13), (12, 13), (6, 12), (7, 13),
    (6, 7), (6, 8), (7, 9), (8, 10), (9, 11), (2, 3), (1, 2), (1, 3),
    (2, 4), (3, 5), (4, 6), (5, 7))


@lru_cache(maxsize=None)
def goliath_meta() -> dict:
    """Return the parsed ``goliath_keypoints_308.json``."""
    return load_goliath_keypoints()


@lru_cache(maxsize=None)
def goliath_names() -> Tuple[str, ...]:
    """Return the 308 Goliath keypoint names in dataset order."""
    kps = sorted(goliath_meta()['keypoints'], key=lambda k: k['id'])
    return tuple(k['name'] for k in kps)


@lru_cache(maxsize=None)
def goliath_index() -> Dict[str, int]:
    """Return a mapping Goliath keypoint name -> index."""
    return {n: i for i, n in enumerate(goliath_names())}


@lru_cache(maxsize=None)
def goliath_skeleton() -> Tuple[Tuple[int, int], ...]:
    """Return the Goliath skeleton as 1-based index pairs (COCO style)."""
    idx = goliath_index()
    return tuple((idx[s['link'][0]] + 1, idx[s['link'][1]] + 1)
                 for s in goliath_meta()['skeleton'])


@lru_cache(maxsize=None)
def coco17_to_goliath() -> Tuple[int, ...]:
    """Return, for each COCO-17 keypoint, its index in the Goliath order."""
    idx = goliath_index()
    return tuple(idx[n] for n in COCO17_NAMES)


@lru_cache(maxsize=None)
def part_classes() -> Tuple[str, ...]:
    """Return the 28 ``goliath_28`` body-part class names (0 = Background)."""
    return tuple(load_body_part_classes('goliath_28')['classes'])


@lru_cache(maxsize=None)
def part_palette() -> Tuple[Tuple[int, int, int], ...]:
    """Return the ``goliath_28`` colour palette (one RGB triple per class)."""
    return tuple(
        tuple(c) for c in load_body_part_classes('goliath_28')['palette'])


def class_id(name: str) -> int:
    """Return the ``goliath_28`` class id of a class name.

    Args:
        name: Class name as written in ``body_part_classes.json``.

    Returns:
        The integer class id.
    """
    return part_classes().index(name)


def keypoint_names(num: int) -> List[str]:
    """Return the keypoint names of the 308-point or the 17-point layout."""
    if num == 308:
        return list(goliath_names())
    if num == 17:
        return list(COCO17_NAMES)
    raise ValueError(f'unknown keypoint layout: {num}')
