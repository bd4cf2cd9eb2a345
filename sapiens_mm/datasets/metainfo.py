"""Keypoint and class definitions shipped as package data (``data/``)."""
import json
from functools import lru_cache
from pathlib import Path
from typing import Dict, Literal

DATA_DIR = Path(__file__).resolve().parents[1] / 'data'

__all__ = [
    'DATA_DIR', 'BODY_PART_VOCABS', 'load_goliath_keypoints',
    'load_body_part_classes', 'vocab_for_num_classes', 'load_keypoint_formats',
    'body_part_label_map', 'BodyPartVocab'
]

#: Body-part vocabularies of ``body_part_classes.json``: Sapiens v1's 28
#: Goliath classes, LIP / CIHP's 20, and Sapiens2's 29 ("dome29").
BodyPartVocab = Literal['goliath_28', 'lip_cihp_20', 'dome_29']

#: Number of classes -> body-part vocabulary in ``body_part_classes.json``.
BODY_PART_VOCABS: Dict[int, str] = {
    28: 'goliath_28', 20: 'lip_cihp_20', 29: 'dome_29'}


@lru_cache(maxsize=None)
def load_goliath_keypoints() -> dict:
    """The 308-keypoint Goliath definition: ``keypoints`` (id, name, color,
    type, swap), ``skeleton``, ``joint_weights``, ``sigmas``, ``groups`` and
    ``coco_wholebody_to_goliath``."""
    with open(DATA_DIR / 'goliath_keypoints_308.json') as f:
        return json.load(f)


@lru_cache(maxsize=None)
def load_body_part_classes(vocab: BodyPartVocab = 'goliath_28') -> dict:
    """A body-part vocabulary: ``classes``, ``palette``, ``flip_swap_pairs``,
    ``class_weight``, ``ignore_index`` (and ``original_34_classes`` for
    goliath_28, ``renames`` for dome_29)."""
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


@lru_cache(maxsize=None)
def body_part_label_map(source: Literal['goliath_28', 'original_34'],
                        target: Literal['goliath_28',
                                        'dome_29'] = 'dome_29'
                        ) -> Dict[int, int]:
    """Map the class ids of one Goliath vocabulary to another, by name.

    ``source='original_34'`` is the 34-class Goliath annotation
    (``goliath_28['original_34_classes']``). A source class keeps its name
    in the target unless the target's ``renames[source]`` table renames it
    (dome_29: Chair -> Background, Eyeglass_Frame / Eyeglass_Lenses ->
    Eyeglass, Lower_Spandex -> Lower_Clothing); a name the target lacks maps
    to the target's ignore index (dome_29: Headset, Visible_Badge; goliath_28:
    all six classes it dropped). ``goliath_28 -> dome_29`` keeps ids 0 and 1
    and shifts every id k >= 2 to k + 1.

    Returns:
        ``{source_id: target_id}`` for every source id.
    """
    goliath = load_body_part_classes('goliath_28')
    names = (goliath['original_34_classes']
             if source == 'original_34' else load_body_part_classes(
                 source)['classes'])
    vocab = load_body_part_classes(target)
    new_ids = {name: i for i, name in enumerate(vocab['classes'])}
    renames = vocab.get('renames', {}).get(source, {})
    ignore = vocab.get('ignore_index', 255)
    return {
        old_id: new_ids.get(renames.get(name, name), ignore)
        for old_id, name in enumerate(names)
    }
