"""COCO-style OKS AP/AR for the 308 Goliath keypoints, overall and per group.
"""
import contextlib
import io
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np
from mmengine.fileio import load
from mmengine.logging import print_log
from mmpose.evaluation.metrics import CocoMetric
from mmpose.registry import METRICS
from xtcocotools.coco import COCO
from xtcocotools.cocoeval import COCOeval

from sapiens_mm.datasets.metainfo_goliath import (
    GOLIATH_GROUPS, goliath_keypoint_groups, goliath_keypoints_from_annotation)
from .checked_coco_metric import CheckedCocoGroundTruthMixin

__all__ = ['GoliathMetric', 'keypoint_oks_stats', 'STATS_NAMES']

#: Names of the 10 numbers of a COCO keypoint evaluation, in order.
STATS_NAMES = ('AP', 'AP .5', 'AP .75', 'AP (M)', 'AP (L)', 'AR', 'AR .5',
               'AR .75', 'AR (M)', 'AR (L)')


def _coco_from_dict(dataset: dict) -> COCO:
    coco = COCO()
    coco.dataset = dataset
    with contextlib.redirect_stdout(io.StringIO()):
        coco.createIndex()
    return coco


def keypoint_oks_stats(gt: Mapping,
                       results: Sequence[Mapping],
                       sigmas: Sequence[float],
                       indices: Optional[Sequence[int]] = None,
                       use_area: bool = True) -> Optional[np.ndarray]:
    """COCO keypoint evaluation (OKS AP/AR) on a subset of the keypoints.

    The ground truth and results are cut down to ``indices``, each ground
    truth's ``num_keypoints`` is recounted on that subset (people with no
    labelled keypoint in it are ignored, as COCO does), and the standard
    COCO protocol (10 OKS thresholds 0.50:0.95, 20 detections per image,
    medium/large areas) runs with the matching ``sigmas``.

    Args:
        gt: COCO-format ground truth: ``images``, ``categories`` and
            ``annotations`` (``id``, ``image_id``, ``category_id``,
            ``bbox``, ``area``, ``iscrowd`` and ``keypoints`` with 3 x K
            values).
        results: COCO keypoint results: ``image_id``, ``category_id``,
            ``keypoints`` (3 x K values: x, y, score) and ``score``.
        sigmas: Per-keypoint OKS sigmas, length K.
        indices: Keypoints to evaluate (default: all K).
        use_area: Normalise OKS by the ground-truth ``area`` (COCO); if
            False, by the ground-truth box area.

    Returns:
        The 10 COCO numbers in :data:`STATS_NAMES` order, or None when no
        ground-truth person has a labelled keypoint among ``indices``.
    """
    sigmas = np.asarray(sigmas, dtype=np.float64)
    idx = np.arange(len(sigmas)) if indices is None else np.asarray(
        indices, dtype=np.int64)

    def cut(values) -> np.ndarray:
        kpts = np.asarray(values, dtype=np.float64).reshape(-1, 3)
        if len(kpts) != len(sigmas):
            raise ValueError(
                f'Got {len(kpts)} keypoints but {len(sigmas)} sigmas; the '
                'ground truth, results and sigmas must use the same layout.')
        return kpts[idx]

    anns = []
    for ann in gt['annotations']:
        kpts = cut(ann['keypoints'])
        anns.append(
            dict(
                ann,
                keypoints=kpts.reshape(-1).tolist(),
                num_keypoints=int((kpts[:, 2] > 0).sum())))
    if not any(a['num_keypoints'] > 0 and not a.get('iscrowd', 0)
               for a in anns):
        return None
    coco_gt = _coco_from_dict(
        dict(images=list(gt['images']), annotations=anns,
             categories=list(gt['categories'])))
    if len(results) == 0:
        return np.zeros(len(STATS_NAMES))
    dets = [
        dict(
            image_id=r['image_id'],
            category_id=r['category_id'],
            keypoints=cut(r['keypoints']).reshape(-1).tolist(),
            score=float(r['score'])) for r in results
    ]
    with contextlib.redirect_stdout(io.StringIO()):
        coco_dt = coco_gt.loadRes(dets)
        coco_eval = COCOeval(coco_gt, coco_dt, 'keypoints', sigmas[idx],
                             use_area)
        coco_eval.params.useSegm = None
        coco_eval.evaluate()
        coco_eval.accumulate()
        coco_eval.summarize()
    return np.asarray(coco_eval.stats, dtype=np.float64)


@METRICS.register_module()
class GoliathMetric(CheckedCocoGroundTruthMixin, CocoMetric):
    """OKS AP/AR of 308-keypoint predictions, overall and per body part.

    The evaluation follows mmpose's ``CocoWholeBodyMetric``: COCO keypoint
    AP/AR with the 308 Goliath sigmas on all keypoints (reported as ``AP``,
    ``AR``, ... so ``save_best='goliath/AP'`` works) and on each keypoint
    group (``body/AP``, ``body/AR``, ``foot/AP``, ... for body 17, foot 6,
    face 238, left_hand 20, right_hand 20, extra 7), each group with its own
    sigmas and its own count of labelled keypoints per person.

    Ground truth may be Goliath annotations (3 x 308 ``keypoints``) or
    COCO-WholeBody annotations: the latter are mapped to the 308 layout
    through their 53 shared keypoints (17 body, 6 foot, 15 per hand), which
    evaluates a 308-keypoint model on COCO-WholeBody over those 53 points.
    Groups without any labelled keypoint (e.g. the face on COCO-WholeBody)
    are left out of the results.

    The arguments after ``groups`` (``use_area``, ``score_mode``,
    ``keypoint_score_thr``, ``nms_mode``, ``nms_thr``, ``format_only``,
    ``outfile_prefix``, ``collect_device``, ``prefix``) are those of mmpose's
    :class:`~mmpose.evaluation.CocoMetric`; the default prefix is
    ``'goliath'``.

    Args:
        ann_file: Ground-truth COCO-format file, checked when the metric is
            built (see :class:`CheckedCocoGroundTruthMixin`). ``None``
            (default) uses the raw annotations the dataset passes along.
        groups: Keypoint groups to report besides the overall numbers;
            names from ``('body', 'foot', 'face', 'left_hand', 'right_hand',
            'extra')``. Defaults to all of them.
    """
    default_prefix: Optional[str] = 'goliath'

    def __init__(self,
                 ann_file: Optional[str] = None,
                 groups: Sequence[str] = GOLIATH_GROUPS,
                 use_area: bool = True,
                 score_mode: str = 'bbox_keypoint',
                 keypoint_score_thr: float = 0.2,
                 nms_mode: str = 'oks_nms',
                 nms_thr: float = 0.9,
                 format_only: bool = False,
                 outfile_prefix: Optional[str] = None,
                 collect_device: str = 'cpu',
                 prefix: Optional[str] = None) -> None:
        unknown = [g for g in groups if g not in GOLIATH_GROUPS]
        if unknown:
            raise ValueError(f'Unknown keypoint groups {unknown}; choose from '
                             f'{list(GOLIATH_GROUPS)}.')
        super().__init__(
            ann_file=ann_file,
            use_area=use_area,
            iou_type='keypoints',
            score_mode=score_mode,
            keypoint_score_thr=keypoint_score_thr,
            nms_mode=nms_mode,
            nms_thr=nms_thr,
            format_only=format_only,
            outfile_prefix=outfile_prefix,
            collect_device=collect_device,
            prefix=prefix)
        self.groups = tuple(groups)

    def _ground_truth(self) -> dict:
        """The ground truth as a COCO dict with 308 keypoints per person."""
        dataset = self.coco.dataset
        anns = []
        for ann in dataset['annotations']:
            try:
                kpts = goliath_keypoints_from_annotation(ann)
            except ValueError as e:
                raise ValueError(
                    f'{type(self).__name__} evaluates 308-keypoint Goliath '
                    f'or COCO-WholeBody ground truth: {e}') from None
            anns.append(dict(ann, keypoints=kpts.reshape(-1).tolist()))
        categories = dataset.get('categories') or [
            dict(id=1, name='person')
        ]
        return dict(
            images=dataset['images'],
            annotations=anns,
            categories=categories)

    def _do_python_keypoint_eval(self, outfile_prefix: str) -> list:
        """Evaluate ``<outfile_prefix>.keypoints.json`` on all 308 keypoints
        and on each group.

        Returns:
            ``(name, value)`` pairs: the 10 overall COCO numbers, then
            ``'<group>/AP'`` and ``'<group>/AR'`` for each group.
        """
        num_keypoints = self.dataset_meta['num_keypoints']
        if num_keypoints != 308:
            raise ValueError(
                f'{type(self).__name__} needs the 308-keypoint Goliath '
                f'metainfo, but the dataset has {num_keypoints} keypoints. '
                'Use it with GoliathDataset, or CocoMetric for other data.')
        results = load(f'{outfile_prefix}.keypoints.json')
        gt = self._ground_truth()
        sigmas = np.asarray(self.dataset_meta['sigmas'])
        groups: Dict[str, List[int]] = goliath_keypoint_groups()

        info: List[tuple] = []
        overall = keypoint_oks_stats(gt, results, sigmas, None, self.use_area)
        if overall is None:
            raise ValueError('The ground truth has no labelled keypoint; '
                             'nothing to evaluate.')
        info += list(zip(STATS_NAMES, overall.tolist()))
        lines = [f'{"group":<11} {"AP":>6} {"AR":>6}',
                 f'{"all":<11} {overall[0]:6.3f} {overall[5]:6.3f}']
        for name in self.groups:
            stats = keypoint_oks_stats(gt, results, sigmas, groups[name],
                                       self.use_area)
            if stats is None:
                lines.append(f'{name:<11} {"n/a":>6} {"n/a":>6}')
                continue
            info += [(f'{name}/AP', float(stats[0])),
                     (f'{name}/AR', float(stats[5]))]
            lines.append(f'{name:<11} {stats[0]:6.3f} {stats[5]:6.3f}')
        print_log('Goliath keypoint OKS evaluation:\n' + '\n'.join(lines),
                  logger='current')
        return info
