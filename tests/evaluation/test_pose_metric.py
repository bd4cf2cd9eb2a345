"""OKS AP/AR of GoliathMetric / keypoint_oks_stats against pycocotools."""
import contextlib
import io
import json

import numpy as np
import pytest
from mmengine.logging import MessageHub
from mmpose.datasets.datasets.utils import parse_pose_metainfo
from pycocotools.coco import COCO as PyCOCO
from pycocotools.cocoeval import COCOeval as PyCOCOeval
from pycocotools.cocoeval import Params as PyParams

from sapiens_mm.datasets import (coco_wholebody_to_goliath,
                                 goliath_keypoint_groups, goliath_metainfo)
from sapiens_mm.evaluation import GoliathMetric, keypoint_oks_stats
from sapiens_mm.evaluation.metrics.goliath_metric import STATS_NAMES

COCO_SIGMAS = PyParams(iouType='keypoints').kpt_oks_sigmas
GOLIATH_SIGMAS = np.asarray(goliath_metainfo()['sigmas'])


def make_gt(num_keypoints, rng, num_images=4):
    """Random COCO keypoint ground truth: 1-3 people per image, random
    visibility, one unlabelled person (ignored by COCO)."""
    images, anns = [], []
    for img_id in range(1, num_images + 1):
        images.append(dict(id=img_id, width=640, height=480))
        for _ in range(rng.integers(1, 4)):
            w, h = rng.uniform(40, 250), rng.uniform(80, 300)
            x, y = rng.uniform(0, 640 - w), rng.uniform(0, 480 - h)
            kpts = np.stack([
                rng.uniform(x, x + w, num_keypoints),
                rng.uniform(y, y + h, num_keypoints),
                rng.choice([0, 1, 2], num_keypoints, p=[0.2, 0.3, 0.5])
            ], 1)
            kpts[kpts[:, 2] == 0, :2] = 0
            anns.append(
                dict(id=len(anns) + 1, image_id=img_id, category_id=1,
                     bbox=[x, y, w, h], area=w * h * 0.6, iscrowd=0,
                     num_keypoints=int((kpts[:, 2] > 0).sum()),
                     keypoints=kpts.reshape(-1).tolist()))
    anns[-1]['keypoints'] = [0.0] * (3 * num_keypoints)
    anns[-1]['num_keypoints'] = 0
    return dict(images=images, annotations=anns,
                categories=[dict(id=1, name='person')])


def make_results(gt, rng, noise, drop=1, false_pos=2):
    """Predictions: every labelled person but ``drop`` with Gaussian noise
    proportional to its size, plus ``false_pos`` random people."""
    results = []
    people = [a for a in gt['annotations'] if a['num_keypoints'] > 0]
    for ann in people[drop:]:
        kpts = np.asarray(ann['keypoints']).reshape(-1, 3).copy()
        scale = np.sqrt(ann['area'])
        kpts[:, :2] += rng.normal(0, noise * scale, (len(kpts), 2))
        kpts[:, 2] = rng.uniform(0.3, 1.0, len(kpts))
        results.append(dict(image_id=ann['image_id'], category_id=1,
                            keypoints=kpts.reshape(-1).tolist(),
                            score=float(rng.uniform(0.2, 1.0))))
    k = len(gt['annotations'][0]['keypoints']) // 3
    for i in range(false_pos):
        kpts = np.stack([rng.uniform(0, 640, k), rng.uniform(0, 480, k),
                         rng.uniform(0, 1, k)], 1)
        results.append(dict(image_id=1 + i, category_id=1,
                            keypoints=kpts.reshape(-1).tolist(),
                            score=float(rng.uniform(0.2, 1.0))))
    return results


def pycocotools_stats(gt, results, sigmas, indices=None):
    """Reference: pycocotools' COCOeval on the keypoints ``indices``."""
    idx = np.arange(len(sigmas)) if indices is None else np.asarray(indices)

    def cut(values):
        return np.asarray(values, float).reshape(-1, 3)[idx]

    anns = []
    for a in gt['annotations']:
        k = cut(a['keypoints'])
        anns.append(dict(a, keypoints=k.reshape(-1).tolist(),
                         num_keypoints=int((k[:, 2] > 0).sum())))
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = PyCOCO()
        coco_gt.dataset = dict(gt, annotations=anns)
        coco_gt.createIndex()
        coco_dt = coco_gt.loadRes([
            dict(r, keypoints=cut(r['keypoints']).reshape(-1).tolist())
            for r in results
        ])
        ev = PyCOCOeval(coco_gt, coco_dt, 'keypoints')
        ev.params.kpt_oks_sigmas = np.asarray(sigmas)[idx]
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return np.asarray(ev.stats)


def test_oks_ap_17_keypoints_equals_pycocotools():
    rng = np.random.default_rng(0)
    gt = make_gt(17, rng)
    results = make_results(gt, rng, noise=0.05)
    ours = keypoint_oks_stats(gt, results, COCO_SIGMAS)
    ref = pycocotools_stats(gt, results, COCO_SIGMAS)
    # a non-trivial operating point: neither perfect nor zero
    assert 0.1 < ref[0] < 0.95
    np.testing.assert_allclose(ours, ref, atol=1e-12)
    # and on a keypoint subset (the head: nose, eyes, ears)
    ours = keypoint_oks_stats(gt, results, COCO_SIGMAS, [0, 1, 2, 3, 4])
    ref = pycocotools_stats(gt, results, COCO_SIGMAS, [0, 1, 2, 3, 4])
    np.testing.assert_allclose(ours, ref, atol=1e-12)


def test_oks_stats_edge_cases():
    rng = np.random.default_rng(1)
    gt = make_gt(17, rng, num_images=2)
    perfect = make_results(gt, rng, noise=0.0, drop=0, false_pos=0)
    assert keypoint_oks_stats(gt, perfect, COCO_SIGMAS)[0] == pytest.approx(1)
    assert keypoint_oks_stats(gt, [], COCO_SIGMAS)[0] == 0
    for a in gt['annotations']:
        k = np.asarray(a['keypoints']).reshape(-1, 3)
        k[0] = 0
        a['keypoints'] = k.reshape(-1).tolist()
    assert keypoint_oks_stats(gt, perfect, COCO_SIGMAS, [0]) is None
    with pytest.raises(ValueError, match='sigmas'):
        keypoint_oks_stats(gt, perfect, GOLIATH_SIGMAS)


def goliath_meta():
    meta = parse_pose_metainfo(goliath_metainfo())
    meta['CLASSES'] = [dict(id=1, name='person')]
    return meta


def run_metric(metric, gt, results_by_ann):
    """Feed per-person predictions through process() + evaluate()."""
    metric.dataset_meta = goliath_meta()
    images = {im['id']: im for im in gt['images']}
    for ann in gt['annotations']:
        if ann['id'] not in results_by_ann:
            continue
        kpts, scores, score = results_by_ann[ann['id']]
        img = images[ann['image_id']]
        sample = dict(
            id=ann['id'], img_id=ann['image_id'], category_id=1,
            ori_shape=(img['height'], img['width']), raw_ann_info=ann,
            gt_instances=dict(),
            pred_instances=dict(keypoints=kpts[None], keypoint_scores=scores[
                None], bbox_scores=np.array([score])))
        metric.process([], [sample])
    return metric.evaluate(size=len(metric.results))


def per_person(gt, rng, noise_body, noise_rest):
    """308-keypoint predictions, noisier outside the body group."""
    body = goliath_keypoint_groups()['body']
    out = {}
    for ann in gt['annotations']:
        if ann['num_keypoints'] == 0:  # nobody to detect there
            continue
        k = np.asarray(ann['keypoints']).reshape(-1, 3)[:, :2].copy()
        s = np.sqrt(ann['area'])
        noise = np.full((308, 1), noise_rest * s)
        noise[body] = noise_body * s
        k += rng.normal(0, 1, k.shape) * noise
        out[ann['id']] = (k, rng.uniform(0.5, 1.0, 308),
                          float(rng.uniform(0.2, 1)))
    return out


def test_goliath_metric_perfect_predictions_give_ap_1():
    MessageHub.get_current_instance().update_info('goliath_ann_file', None)
    rng = np.random.default_rng(2)
    gt = make_gt(308, rng, num_images=3)
    preds = per_person(gt, rng, 0.0, 0.0)
    res = run_metric(GoliathMetric(nms_mode='none'), gt, preds)
    for key in ['AP', 'AR', 'body/AP', 'foot/AP', 'face/AP', 'left_hand/AP',
                'right_hand/AP', 'extra/AP', 'face/AR']:
        assert res[f'goliath/{key}'] == pytest.approx(1.0), key


def test_goliath_metric_matches_pycocotools_overall_and_per_group(tmp_path):
    rng = np.random.default_rng(3)
    gt = make_gt(308, rng, num_images=4)
    ann_file = tmp_path / 'gt.json'
    ann_file.write_text(json.dumps(gt))
    preds = per_person(gt, rng, noise_body=0.03, noise_rest=0.004)
    del preds[gt['annotations'][0]['id']]  # one missed person
    metric = GoliathMetric(ann_file=str(ann_file), score_mode='bbox',
                           nms_mode='none', groups=('body', 'face'))
    res = run_metric(metric, gt, preds)
    results = [
        dict(image_id=a['image_id'], category_id=1,
             keypoints=np.concatenate(
                 [preds[a['id']][0], preds[a['id']][1][:, None]],
                 1).reshape(-1).tolist(),
             score=preds[a['id']][2])
        for a in gt['annotations'] if a['id'] in preds
    ]
    whole = pycocotools_stats(gt, results, GOLIATH_SIGMAS)
    for name, value in zip(STATS_NAMES, whole):
        assert res[f'goliath/{name}'] == pytest.approx(value, abs=1e-9), name
    groups = goliath_keypoint_groups()
    body = pycocotools_stats(gt, results, GOLIATH_SIGMAS, groups['body'])
    face = pycocotools_stats(gt, results, GOLIATH_SIGMAS, groups['face'])
    assert res['goliath/body/AP'] == pytest.approx(body[0], abs=1e-9)
    assert res['goliath/body/AR'] == pytest.approx(body[5], abs=1e-9)
    assert res['goliath/face/AP'] == pytest.approx(face[0], abs=1e-9)
    assert 'goliath/foot/AP' not in res  # only the groups asked for
    assert body[0] != pytest.approx(face[0])  # the groups really differ


def test_goliath_metric_on_coco_wholebody_uses_the_53_common_keypoints(
        tmp_path):
    """A 308-keypoint model on COCO-WholeBody ground truth: only the 53
    shared keypoints count, the face group has nothing to evaluate."""
    rng = np.random.default_rng(4)
    wb = make_gt(133, rng, num_images=3)
    mapping = coco_wholebody_to_goliath()
    fields = [('keypoints', 0, 17), ('foot_kpts', 17, 23),
              ('face_kpts', 23, 91), ('lefthand_kpts', 91, 112),
              ('righthand_kpts', 112, 133)]
    as_308 = {}
    for a in wb['annotations']:
        k133 = np.asarray(a['keypoints']).reshape(-1, 3)
        for field, s, e in fields:
            a[field] = k133[s:e].reshape(-1).tolist()
        k308 = np.zeros((308, 3))
        k308[mapping[:, 1]] = k133[mapping[:, 0]]
        as_308[a['id']] = k308
    ann_file = tmp_path / 'wb.json'
    ann_file.write_text(json.dumps(wb))
    # correct on the 53 shared points, garbage everywhere else
    preds = {}
    for a in wb['annotations']:
        k = rng.uniform(0, 480, (308, 2))
        k[mapping[:, 1]] = as_308[a['id']][mapping[:, 1], :2]
        preds[a['id']] = (k, np.ones(308), 1.0)
    res = run_metric(
        GoliathMetric(ann_file=str(ann_file), nms_mode='none'), wb, preds)
    assert res['goliath/AP'] == pytest.approx(1.0)
    for group in ['body', 'foot', 'left_hand', 'right_hand']:
        assert res[f'goliath/{group}/AP'] == pytest.approx(1.0)
    assert 'goliath/face/AP' not in res and 'goliath/extra/AP' not in res


def test_goliath_metric_rejects_bad_input(tmp_path):
    with pytest.raises(ValueError, match='Unknown keypoint groups'):
        GoliathMetric(groups=('body', 'torso'))
    gt = make_gt(17, np.random.default_rng(5), num_images=1)
    ann_file = tmp_path / 'coco17.json'
    ann_file.write_text(json.dumps(gt))
    metric = GoliathMetric(ann_file=str(ann_file), nms_mode='none')
    preds = {a['id']: (np.zeros((308, 2)), np.ones(308), 1.0)
             for a in gt['annotations']}
    with pytest.raises(ValueError, match='924'):
        run_metric(metric, gt, preds)
