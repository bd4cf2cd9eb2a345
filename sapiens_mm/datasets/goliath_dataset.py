"""COCO-format dataset with the 308 Goliath keypoints."""
import copy
from typing import Optional

from mmpose.datasets import BaseCocoStyleDataset
from mmpose.registry import DATASETS

from .coco_annotations import (AnnotationFileError,
                               CheckedCocoAnnotationsMixin)
from .metainfo_goliath import (goliath_keypoints_from_annotation,
                               goliath_metainfo)

__all__ = ['GoliathDataset']


@DATASETS.register_module()
class GoliathDataset(CheckedCocoAnnotationsMixin, BaseCocoStyleDataset):
    """Person keypoints in the 308-point Goliath layout, COCO-format JSON.

    The annotation file is a COCO keypoint file (``images`` with ``id``,
    ``file_name``, ``height``, ``width``; ``annotations`` with ``id``,
    ``image_id``, ``category_id``, ``bbox`` (x, y, w, h), ``area``,
    ``iscrowd``, ``num_keypoints`` and ``keypoints``) whose ``keypoints``
    hold 3 x 308 values (x, y, visibility) in the order of
    :func:`~sapiens_mm.datasets.metainfo_goliath.goliath_metainfo`. This is
    the format to fine-tune on your own 308-keypoint labels.

    COCO-WholeBody annotation files (``keypoints`` + ``foot_kpts`` +
    ``face_kpts`` + ``lefthand_kpts`` + ``righthand_kpts``) are read too:
    their 53 keypoints shared with Goliath (17 body, 6 foot, 15 per hand) are
    put at their Goliath indices and every other keypoint is unlabelled. With
    :class:`~sapiens_mm.evaluation.GoliathMetric` this evaluates a
    308-keypoint model on COCO-WholeBody.

    The metainfo (names, flip pairs from ``swap``, skeleton, sigmas, joint
    weights) comes from the package data, so no ``metainfo`` argument is
    needed. Every argument is the one of mmpose's
    :class:`~mmpose.datasets.BaseCocoStyleDataset` (``ann_file``,
    ``data_root``, ``data_prefix=dict(img=...)``, ``bbox_file``,
    ``data_mode``, ``pipeline``, ``test_mode``, ...). The annotation file
    is checked as described in
    :class:`~sapiens_mm.datasets.coco_annotations.CheckedCocoAnnotationsMixin`.

    Example:
        >>> dataset = GoliathDataset(
        ...     data_root='data/goliath/',
        ...     ann_file='train/annotations/goliath_308.json',
        ...     data_prefix=dict(img='train/images/'))
    """

    METAINFO: dict = goliath_metainfo()

    def keypoint_layout(self) -> None:
        """None: 308 ``keypoints`` or the COCO-WholeBody fields, whose
        counts :func:`goliath_keypoints_from_annotation` checks."""
        return None

    def parse_data_info(self, raw_data_info: dict) -> Optional[dict]:
        """Parse one annotation; COCO-WholeBody ones are mapped to 308.

        Raises:
            AnnotationFileError: if the annotation has neither 308 keypoints
                nor the COCO-WholeBody fields.
        """
        ann = raw_data_info['raw_ann_info']
        if 'bbox' not in ann or 'keypoints' not in ann:
            return None
        try:
            keypoints = goliath_keypoints_from_annotation(ann)
        except ValueError as e:
            raise AnnotationFileError(f'{self.ann_file}: {e}') from None
        ann = copy.copy(ann)
        ann['keypoints'] = keypoints.reshape(-1).tolist()
        ann['num_keypoints'] = int((keypoints[:, 2] > 0).sum())
        return super().parse_data_info(
            dict(raw_data_info, raw_ann_info=ann))
