"""mmpose's COCO keypoint metrics with a checked ground-truth file."""
from typing import Dict, Optional

from mmpose.evaluation.metrics import CocoMetric, CocoWholeBodyMetric
from mmpose.registry import METRICS

from sapiens_mm.datasets.coco_annotations import (
    ANNOTATION_PARSE_ERRORS, WHOLEBODY_KEYPOINT_FIELDS,
    check_coco_keypoint_annotations, explain_annotation_error)

__all__ = [
    'CheckedCocoGroundTruthMixin', 'CheckedCocoMetric',
    'CheckedCocoWholeBodyMetric'
]


class CheckedCocoGroundTruthMixin:
    """Checks the ``ann_file`` of an mmpose COCO metric when it is built.

    Put it before the metric class. The ground truth the metric read is
    checked with :func:`~sapiens_mm.datasets.check_coco_keypoint_annotations`
    (a non-finite or negative-size ``bbox`` among others would otherwise be
    used and change AP); if xtcocotools fails on the file, the error names
    the first invalid entry. Without ``ann_file`` the metric uses the
    dataset's annotations, which the dataset checked.
    """

    #: ``keypoint_layout`` of the check (None: triplets of finite numbers,
    #: one length per field across the file).
    ground_truth_layout: Optional[Dict[str, int]] = None

    def __init__(self, ann_file: Optional[str] = None, **kwargs) -> None:
        try:
            super().__init__(ann_file=ann_file, **kwargs)
        except ANNOTATION_PARSE_ERRORS as e:
            if ann_file is None:
                raise
            raise explain_annotation_error(
                ann_file, e, keypoint_layout=self.ground_truth_layout,
                image_files=False) from None
        if ann_file is not None:
            check_coco_keypoint_annotations(
                self.coco.dataset, ann_file,
                keypoint_layout=self.ground_truth_layout, image_files=False)


@METRICS.register_module()
class CheckedCocoMetric(CheckedCocoGroundTruthMixin, CocoMetric):
    """mmpose's :class:`~mmpose.evaluation.CocoMetric` whose ``ann_file``
    is checked (see :class:`CheckedCocoGroundTruthMixin`). Same arguments
    and, for a valid file, the same numbers."""


@METRICS.register_module()
class CheckedCocoWholeBodyMetric(CheckedCocoGroundTruthMixin,
                                 CocoWholeBodyMetric):
    """mmpose's :class:`~mmpose.evaluation.CocoWholeBodyMetric` whose
    ``ann_file`` is checked (see :class:`CheckedCocoGroundTruthMixin`);
    annotations with keypoints need all five COCO-WholeBody fields."""

    ground_truth_layout = dict(WHOLEBODY_KEYPOINT_FIELDS)
