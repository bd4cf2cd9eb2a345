"""mmpose metainfo for the 308-keypoint Goliath skeleton.

Everything is built from the package data file
``sapiens_mm/data/goliath_keypoints_308.json`` (through
:func:`sapiens_mm.datasets.metainfo.load_goliath_keypoints`), never from the
working directory, so it works the same from any folder and after a
non-editable install.
"""
from typing import Dict, List

import numpy as np

from .metainfo import load_goliath_keypoints

__all__ = [
    'GOLIATH_GROUPS', 'goliath_metainfo', 'goliath_keypoint_groups',
    'coco_wholebody_to_goliath', 'goliath_keypoints_from_annotation'
]

#: Keypoint groups of the 308-keypoint layout, in evaluation order.
GOLIATH_GROUPS = ('body', 'foot', 'face', 'left_hand', 'right_hand', 'extra')


def goliath_metainfo() -> dict:
    """The Goliath skeleton as an mmpose ``dataset_info`` dict.

    The result can be passed anywhere mmpose takes a ``metainfo`` dict (it
    goes through :func:`mmpose.datasets.datasets.utils.parse_pose_metainfo`):
    ``keypoint_info`` (name, id, colour, upper/lower type and the ``swap``
    name that gives the flip pairs), ``skeleton_info`` (65 links),
    ``joint_weights`` and ``sigmas`` (308 each).
    """
    data = load_goliath_keypoints()
    keypoint_info = {
        kpt['id']: dict(
            name=kpt['name'],
            id=kpt['id'],
            color=list(kpt['color']),
            type=kpt['type'],
            swap=kpt['swap']) for kpt in data['keypoints']
    }
    skeleton_info = {
        i: dict(link=tuple(link['link']), id=i, color=list(link['color']))
        for i, link in enumerate(data['skeleton'])
    }
    return dict(
        dataset_name=data['dataset_name'],
        paper_info=dict(
            author='Khirodkar, Rawal and Bagautdinov, Timur and Martinez, '
            'Julieta and Zhaoen, Su and James, Austin and Selednik, Peter '
            'and Anderson, Stuart and Saito, Shunsuke',
            title='Sapiens: Foundation for Human Vision Models',
            container='European Conference on Computer Vision',
            year='2024',
            homepage='https://github.com/facebookresearch/sapiens'),
        keypoint_info=keypoint_info,
        skeleton_info=skeleton_info,
        joint_weights=list(data['joint_weights']),
        sigmas=list(data['sigmas']))


def goliath_keypoint_groups() -> Dict[str, List[int]]:
    """Keypoint indices of each group (body 17, foot 6, face 238, left and
    right hand 20 each, extra 7), in :data:`GOLIATH_GROUPS` order."""
    data = load_goliath_keypoints()
    name2id = {kpt['name']: kpt['id'] for kpt in data['keypoints']}
    return {
        group: [name2id[name] for name in data['groups'][group]]
        for group in GOLIATH_GROUPS
    }


def coco_wholebody_to_goliath() -> np.ndarray:
    """The 53 keypoints shared by COCO-WholeBody and Goliath.

    Returns:
        np.ndarray: (53, 2) int array of ``(coco_wholebody_index,
        goliath_index)`` pairs. COCO-WholeBody indices follow the 133-point
        order of mmpose's ``CocoWholeBodyDataset``: ``keypoints`` (17),
        ``foot_kpts`` (6), ``face_kpts`` (68), ``lefthand_kpts`` (21),
        ``righthand_kpts`` (21). The pairs cover 17 body, 6 foot and 15
        points per hand; the face has no common points.
    """
    return np.array(
        load_goliath_keypoints()['coco_wholebody_to_goliath'], dtype=np.int64)


_WHOLEBODY_FIELDS = ('keypoints', 'foot_kpts', 'face_kpts', 'lefthand_kpts',
                     'righthand_kpts')


def goliath_keypoints_from_annotation(ann: dict) -> np.ndarray:
    """The (308, 3) keypoints (x, y, visibility) of a COCO-style annotation.

    Args:
        ann: A COCO annotation whose ``keypoints`` hold 3 x 308 values, or a
            COCO-WholeBody annotation (``keypoints`` with 3 x 17 values plus
            ``foot_kpts``, ``face_kpts``, ``lefthand_kpts`` and
            ``righthand_kpts``). The 53 COCO-WholeBody keypoints shared with
            Goliath are moved to their Goliath index; all other keypoints
            are returned as (0, 0, 0), i.e. unlabelled.

    Raises:
        ValueError: if the annotation is in neither format.
    """
    values = np.asarray(ann['keypoints'], dtype=np.float64).reshape(-1)
    if values.size == 308 * 3:
        return values.reshape(308, 3)
    if all(field in ann for field in _WHOLEBODY_FIELDS):
        wholebody = np.concatenate([
            np.asarray(ann[field], dtype=np.float64).reshape(-1)
            for field in _WHOLEBODY_FIELDS
        ]).reshape(-1, 3)
        if len(wholebody) != 133:
            raise ValueError(
                f'COCO-WholeBody annotation {ann.get("id")} has '
                f'{len(wholebody)} keypoints in total; expected 133.')
        mapping = coco_wholebody_to_goliath()
        keypoints = np.zeros((308, 3))
        keypoints[mapping[:, 1]] = wholebody[mapping[:, 0]]
        return keypoints
    raise ValueError(
        f'Annotation {ann.get("id")} has {values.size} values in '
        '`keypoints`; a Goliath annotation needs 924 (x, y, visibility for '
        'each of the 308 keypoints) and a COCO-WholeBody one needs 51 plus '
        'the foot_kpts/face_kpts/lefthand_kpts/righthand_kpts fields. '
        'Convert the annotation file to one of these formats.')
