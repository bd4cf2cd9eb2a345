"""COCO metrics' ground-truth file (``ann_file``): a non-finite or
negative-size box, or a malformed entry, is refused with the file and
the entry named, for the metrics the shipped pose configs build; a valid
file gives the same numbers as mmpose's CocoMetric."""
import numpy as np
import pytest
from mmengine.config import Config
from mmengine.registry import DefaultScope
from mmpose.datasets.datasets.utils import parse_pose_metainfo
from mmpose.evaluation.metrics import CocoMetric
from mmpose.registry import METRICS
from coco_helpers import DATASET_CONFIGS, WHOLEBODY_EXTRA, write_json

from sapiens_mm.datasets import AnnotationFileError
from sapiens_mm.evaluation import CheckedCocoMetric


@pytest.fixture(autouse=True)
def _mmpose_scope():
    with DefaultScope.overwrite_default_scope('mmpose'):
        yield


def ground_truth(num_keypoints, wholebody=False, seed=0):
    """Two images with two labelled people each (no file names: a metric
    needs only the image ids)."""
    rng = np.random.default_rng(seed)
    images = [dict(id=i, width=640, height=480) for i in (1, 2)]
    anns = []
    for image_id in (1, 1, 2, 2):
        x, y = rng.uniform(0, 300, 2)
        w, h = rng.uniform(60, 200, 2)
        kpts = np.stack([rng.uniform(x, x + w, num_keypoints),
                         rng.uniform(y, y + h, num_keypoints),
                         np.full(num_keypoints, 2.0)], 1)
        ann = dict(id=len(anns) + 1, image_id=image_id, category_id=1,
                   bbox=[x, y, w, h], area=w * h * 0.6, iscrowd=0,
                   num_keypoints=num_keypoints,
                   keypoints=kpts.reshape(-1).tolist())
        if wholebody:
            ann.update({f: [0.0] * 3 * n for f, n in WHOLEBODY_EXTRA.items()})
        anns.append(ann)
    return dict(images=images, annotations=anns,
                categories=[dict(id=1, name='person')])


@pytest.mark.parametrize('config,num_keypoints,wholebody', [
    ('pose_coco.py', 17, False),
    ('pose_coco_wholebody.py', 17, True),
    ('pose_goliath.py', 308, False),
])
@pytest.mark.parametrize('box,problem', [
    ([10, 20, float('nan'), 100], r'\[10, 20, nan, 100\] has a non-finite'),
    ([10, 20, 50, float('inf')], r'\[10, 20, 50, inf\] has a non-finite'),
    ([10, 20, -50, 100], r'\[10, 20, -50, 100\] has a negative width'),
])
def test_shipped_evaluators_refuse_a_bad_ground_truth_box(
        tmp_path, config, num_keypoints, wholebody, box, problem):
    gt = ground_truth(num_keypoints, wholebody)
    gt['annotations'][2]['bbox'] = box
    ann_file = write_json(tmp_path, gt, 'gt.json')
    evaluator = dict(Config.fromfile(str(DATASET_CONFIGS / config)).val_evaluator,
                     ann_file=ann_file)
    with pytest.raises(AnnotationFileError) as info:
        METRICS.build(evaluator)
    assert str(info.value).startswith(
        f'{ann_file}: annotations[2] (id 3, image_id 2): "bbox" ')
    assert info.match(problem)


def test_malformed_ground_truth_entries_are_named(tmp_path):
    gt = ground_truth(17)
    del gt['annotations'][1]['image_id']
    ann_file = write_json(tmp_path, gt, 'gt.json')
    # xtcocotools alone: KeyError: 'image_id'
    with pytest.raises(KeyError):
        CocoMetric(ann_file=ann_file)
    with pytest.raises(AnnotationFileError,
                       match=r'gt.json: annotations\[1\] \(id 2, image_id '
                       r'None\): "image_id" is missing'):
        CheckedCocoMetric(ann_file=ann_file)
    gt = ground_truth(17)
    gt['annotations'][3]['keypoints'] = gt['annotations'][3]['keypoints'][:6]
    ann_file = write_json(tmp_path, gt, 'gt.json')
    with pytest.raises(AnnotationFileError,
                       match=r'annotations\[3\] \(id 4, image_id 2\): '
                       '"keypoints" has 6 values but the first annotation '
                       'has 51'):
        CheckedCocoMetric(ann_file=ann_file)


def evaluate(metric, gt, seed=1):
    """Noisy predictions of every ground-truth person, through process()
    and evaluate()."""
    rng = np.random.default_rng(seed)
    meta = parse_pose_metainfo(dict(from_file='configs/_base_/datasets/'
                                    'coco.py'))
    meta['CLASSES'] = [dict(id=1, name='person')]
    metric.dataset_meta = meta
    for ann in gt['annotations']:
        kpts = np.asarray(ann['keypoints']).reshape(-1, 3)[:, :2]
        kpts = kpts + rng.normal(0, 8, kpts.shape)
        metric.process([], [dict(
            id=ann['id'], img_id=ann['image_id'], category_id=1,
            ori_shape=(480, 640), raw_ann_info=ann, gt_instances=dict(),
            pred_instances=dict(keypoints=kpts[None],
                                keypoint_scores=rng.uniform(0.5, 1, (1, 17)),
                                bbox_scores=np.ones(1)))])
    return metric.evaluate(size=len(metric.results))


def test_valid_ground_truth_gives_mmpose_numbers(tmp_path):
    gt = ground_truth(17)
    ann_file = write_json(tmp_path, gt, 'gt.json')
    ours = evaluate(CheckedCocoMetric(ann_file=ann_file,
                                      outfile_prefix=str(tmp_path / 'a')), gt)
    theirs = evaluate(CocoMetric(ann_file=ann_file,
                                 outfile_prefix=str(tmp_path / 'b')), gt)
    assert ours == theirs
    assert 0 < ours['coco/AP'] < 1  # noisy predictions: a real evaluation
