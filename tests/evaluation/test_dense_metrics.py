"""Depth and normal metrics against numpy references.

Pointmap / albedo metrics against hand computations; the Sapiens2 dense
post-processing against the official steps done by hand.
"""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from mmengine.registry import DefaultScope
from mmseg.registry import METRICS

from sapiens_mm.evaluation import SapiensAlbedoMetric, SapiensPointmapMetric


@pytest.fixture(autouse=True)
def mmseg_scope():
    """Build the metrics under mmseg's scope whatever ran before (a test
    of another library may leave its own scope current)."""
    with DefaultScope.overwrite_default_scope('mmseg'):
        yield


def _depth_sample(pred, gt, name='a.png'):
    return dict(
        img_path=f'/x/{name}',
        pred_depth_map=dict(data=torch.tensor(pred[None], dtype=torch.float32)),
        gt_depth_map=dict(data=torch.tensor(gt[None], dtype=torch.float32)))


def _evaluate(metric, samples):
    metric.process({}, samples)
    return metric.evaluate(len(samples))


def depth_reference(pred, gt, align):
    """Independent per-image numpy computation (np.linalg.lstsq)."""
    valid = gt > 0
    p, g = pred[valid].astype(np.float64), gt[valid].astype(np.float64)
    if align:
        A = np.stack([p, np.ones_like(p)], 1)
        (s, t), *_ = np.linalg.lstsq(A, g, rcond=None)
        p = s * p + t
    p = np.maximum(p, 1e-6)
    r = np.maximum(p / g, g / p)
    d = np.log(p) - np.log(g)
    return dict(
        abs_rel=np.mean(np.abs(p - g) / g),
        sq_rel=np.mean((p - g)**2 / g),
        rmse=np.sqrt(np.mean((p - g)**2)),
        rmse_log=np.sqrt(np.mean(d**2)),
        log10=np.mean(np.abs(np.log10(p) - np.log10(g))),
        silog=np.sqrt(np.mean(d**2) - 0.5 * np.mean(d)**2),
        delta1=np.mean(r < 1.25),
        delta2=np.mean(r < 1.25**2),
        delta3=np.mean(r < 1.25**3))


def _depth_pair(seed):
    rng = np.random.default_rng(seed)
    gt = rng.uniform(1.0, 3.0, (6, 5)).astype(np.float32)
    gt[:2] = -1.0  # background
    pred = (gt + rng.normal(0, 0.4, gt.shape)).astype(np.float32)
    return pred, gt


@pytest.mark.parametrize('align', ['none', 'scale_shift'])
def test_depth_metric_equals_numpy_reference(align):
    pairs = [_depth_pair(0), _depth_pair(1)]
    empty = (np.ones((6, 5), np.float32), np.full((6, 5), -1, np.float32))
    metric = METRICS.build(dict(type='SapiensDepthMetric', align=align))
    got = _evaluate(metric, [_depth_sample(*pairs[0]), _depth_sample(*empty),
                             _depth_sample(*pairs[1])])
    refs = [depth_reference(p, g, align == 'scale_shift') for p, g in pairs]
    assert set(got) == {f'depth/{k}' for k in refs[0]}
    for key in refs[0]:
        # the all-background image is skipped, the others averaged
        expected = np.mean([r[key] for r in refs])
        np.testing.assert_allclose(got[f'depth/{key}'], expected, rtol=1e-5,
                                   atol=1e-6, err_msg=key)


def test_scale_and_shift_alignment_recovers_affine_prediction():
    rng = np.random.default_rng(3)
    gt = rng.uniform(2.0, 5.0, (8, 6)).astype(np.float32)
    gt[0] = 0.0  # background
    # a Sapiens-like relative prediction: foreground min-max normalised
    pred = (gt - 2.0) / 3.0 * 0.8 + 0.1
    pred[0] = -7.0  # garbage on the background must not matter
    aligned = _evaluate(
        METRICS.build(dict(type='SapiensDepthMetric')),
        [_depth_sample(pred, gt)])
    for key in ('abs_rel', 'sq_rel', 'rmse', 'rmse_log', 'log10', 'silog'):
        assert aligned[f'depth/{key}'] < 1e-5, key
    assert aligned['depth/delta1'] == 1.0
    raw = _evaluate(
        METRICS.build(dict(type='SapiensDepthMetric', align='none')),
        [_depth_sample(pred, gt)])
    assert raw['depth/abs_rel'] > 0.5


def test_depth_metric_no_valid_image_and_errors(tmp_path):
    metric = METRICS.build(dict(type='SapiensDepthMetric'))
    got = _evaluate(metric, [_depth_sample(np.ones((3, 3)),
                                           -np.ones((3, 3)))])
    assert all(np.isnan(v) for v in got.values())
    with pytest.raises(ValueError, match='after Resize'):
        METRICS.build(dict(type='SapiensDepthMetric')).process(
            {}, [_depth_sample(np.ones((3, 3)), np.ones((4, 3)))])
    with pytest.raises(ValueError, match='align'):
        METRICS.build(dict(type='SapiensDepthMetric', align='median'))
    with pytest.raises(ValueError, match='output_dir'):
        METRICS.build(dict(type='SapiensDepthMetric', format_only=True))


def test_depth_metric_saves_raw_predictions(tmp_path):
    gt = np.array([[1.0, 2.0], [3.0, -1.0]], np.float32)
    pred = np.array([[0.0, 0.5], [1.0, 9.0]], np.float32)
    metric = METRICS.build(
        dict(type='SapiensDepthMetric', output_dir=str(tmp_path / 'a')))
    got = _evaluate(metric, [_depth_sample(pred, gt, name='img_7.png')])
    assert got['depth/rmse'] < 1e-6  # gt = 2 * pred + 1 on the foreground
    np.testing.assert_array_equal(np.load(tmp_path / 'a/img_7.npy'), pred)
    only = METRICS.build(dict(type='SapiensDepthMetric', format_only=True,
                              output_dir=str(tmp_path / 'b')))
    sample = _depth_sample(pred, gt)
    del sample['gt_depth_map']  # a test set without ground truth
    assert _evaluate(only, [sample]) == {}
    np.testing.assert_array_equal(np.load(tmp_path / 'b/a.npy'), pred)


def _normal_sample(pred, gt):
    return dict(pred_normal_map=dict(data=torch.tensor(pred)),
                gt_normal_map=dict(data=torch.tensor(gt)))


def test_normal_metric_equals_numpy_reference():
    rng = np.random.default_rng(5)
    samples, angles = [], []
    for i in range(2):
        gt = rng.normal(size=(3, 5, 7))
        gt /= np.linalg.norm(gt, axis=0, keepdims=True)
        gt[:, :2] = 0.0  # background
        pred = gt + rng.normal(0, 0.5, gt.shape)
        pred /= np.linalg.norm(pred, axis=0, keepdims=True)
        samples.append(_normal_sample(pred, gt))
        valid = np.linalg.norm(gt, axis=0) > 0
        cos = np.clip((pred * gt).sum(0)[valid], -1, 1)
        angles.append(np.degrees(np.arccos(cos)))
    samples.append(_normal_sample(np.ones((3, 2, 2)), np.zeros((3, 2, 2))))
    angles = np.concatenate(angles)
    metric = METRICS.build(dict(type='SapiensNormalMetric'))
    got = _evaluate(metric, samples)
    np.testing.assert_allclose(got['normal/mean'], angles.mean(), rtol=1e-6)
    np.testing.assert_allclose(got['normal/rmse'],
                               np.sqrt((angles**2).mean()), rtol=1e-6)
    # histogram median: within half a 0.01-degree bin (+ rounding)
    assert abs(got['normal/median'] - np.median(angles)) < 0.011
    for t in (11.25, 22.5, 30):
        np.testing.assert_allclose(got[f'normal/within_{t:g}'],
                                   100 * np.mean(angles < t), rtol=1e-9)


def test_normal_metric_perfect_and_empty():
    gt = np.zeros((3, 4, 4))
    gt[2] = -1.0
    gt[:, 0] = 0.0
    perfect = _evaluate(METRICS.build(dict(type='SapiensNormalMetric')),
                        [_normal_sample(gt.copy(), gt)])
    assert perfect['normal/mean'] < 1e-5
    assert perfect['normal/within_11.25'] == 100.0
    empty = _evaluate(METRICS.build(dict(type='SapiensNormalMetric')),
                      [_normal_sample(gt, np.zeros_like(gt))])
    assert all(np.isnan(v) for v in empty.values())
    with pytest.raises(ValueError, match=r'\(3, H, W\)'):
        METRICS.build(dict(type='SapiensNormalMetric')).process(
            {}, [_normal_sample(gt, gt[:, :2])])


def sample(pred, gt, key='pointmap'):
    return {f'pred_{key}': {'data': torch.tensor(pred)},
            f'gt_{key}': {'data': torch.tensor(gt)}}


def test_pointmap_metric_against_hand_computation():
    # Image 1: two valid points; the prediction is the ground truth at half
    # scale plus an offset on one point. Image 2: one valid point.
    gt1 = np.zeros((3, 1, 3))
    gt1[:, 0, 0] = (0.0, 0.0, 2.0)
    gt1[:, 0, 1] = (1.0, 0.0, 2.0)
    # pixel (0, 2) has Z = 0: not evaluated
    pred1 = gt1 / 2
    pred1[:, 0, 2] = (5.0, 5.0, 5.0)
    pred1[0, 0, 1] += 0.1  # (0.6, 0, 1)
    gt2 = np.zeros((3, 1, 1))
    gt2[:, 0, 0] = (0.0, 1.0, 4.0)
    pred2 = gt2.copy()
    metric = SapiensPointmapMetric(thresholds=(0.05, 0.2))
    metric.process({}, [sample(pred1, gt1), sample(pred2, gt2)])
    out = metric.compute_metrics(metric.results)
    # image 1: s = sum(p . g) / sum(p . p) over (0,0,1), (0.6,0,1) vs
    # (0,0,2), (1,0,2): (2 + 0.6 + 2) / (1 + 0.36 + 1)
    s = 4.6 / 2.36
    e1 = np.array([[0, 0, s - 2], [0.6 * s - 1, 0, s - 2]])
    d1 = np.linalg.norm(e1, axis=1)
    dist = np.concatenate([d1, [0.0]])  # image 2: s = 1, exact
    assert out['l2_mean'] == pytest.approx(dist.mean())
    assert out['rmse'] == pytest.approx(math.sqrt((dist**2).mean()))
    assert out['x_mae'] == pytest.approx(abs(0.6 * s - 1) / 3)
    assert out['y_mae'] == pytest.approx(0.0)
    assert out['z_mae'] == pytest.approx(2 * abs(s - 2) / 3)
    assert out['within_0.05'] == pytest.approx(100 * np.mean(dist < 0.05))
    assert out['within_0.2'] == pytest.approx(100 * np.mean(dist < 0.2))
    assert out['depth_abs_rel'] == pytest.approx(2 * abs(s - 2) / 2 / 3)
    assert out['depth_rmse'] == pytest.approx(
        math.sqrt(2 * (s - 2)**2 / 3))
    raw = [np.linalg.norm([0, 0, 1]), np.linalg.norm([0.4, 0, 1]), 0.0]
    assert out['raw_l2_mean'] == pytest.approx(np.mean(raw))
    # without alignment the error is the raw one
    metric = SapiensPointmapMetric(align='none')
    metric.process({}, [sample(pred1, gt1), sample(pred2, gt2)])
    out = metric.compute_metrics(metric.results)
    assert out['l2_mean'] == pytest.approx(np.mean(raw))


def test_pointmap_metric_bad_input():
    with pytest.raises(ValueError, match="align must be"):
        SapiensPointmapMetric(align='shift')
    metric = SapiensPointmapMetric()
    with pytest.raises(ValueError, match=r'must both be \(3, H, W\)'):
        metric.process({}, [sample(np.zeros((3, 2, 2)), np.zeros((3, 2, 3)))])
    assert math.isnan(metric.compute_metrics([])['l2_mean'])


def test_albedo_metric_against_hand_computation():
    gt = np.full((3, 1, 2), 0.5)
    gt[:, 0, 1] = -1  # invalid
    pred = np.array([[[0.6, 9]], [[0.5, 9]], [[0.2, 9]]])
    metric = SapiensAlbedoMetric()
    metric.process({}, [sample(pred, gt, 'albedo_map')])
    out = metric.compute_metrics(metric.results)
    err = np.array([0.1, 0.0, -0.3])
    assert out['mae'] == pytest.approx(np.abs(err).mean())
    assert out['rmse'] == pytest.approx(math.sqrt((err**2).mean()))
    assert out['psnr'] == pytest.approx(10 * math.log10(1 / (err**2).mean()))


def build_estimator(task):
    from mmengine.registry import init_default_scope
    from mmseg.registry import MODELS
    init_default_scope('mmseg')
    head = dict(
        normal=dict(type='Sapiens2NormalHead'),
        albedo=dict(type='Sapiens2AlbedoHead'),
        pointmap=dict(type='Sapiens2PointmapHead',
                      scale_conv_channels=(4, 4, 4),
                      scale_hidden_channels=(4, ), featmap_size=(16, 12)))
    return MODELS.build(dict(
        type='Sapiens2DenseEstimator', task=task,
        data_preprocessor=dict(type='SegDataPreProcessor'),
        backbone=dict(type='mmpretrain.Sapiens2VisionTransformer',
                      arch='sapiens2_tiny', out_type='featmap'),
        decode_head=dict(head[task], in_channels=64,
                         upsample_channels=(4, ), conv_out_channels=(4, ))))


META = dict(img_padding_size=(2, 1, 0, 3), ori_shape=(10, 8))


def test_normal_postprocess_normalises_before_the_resize():
    model = build_estimator('normal')
    pred = torch.randn(1, 3, 9, 7)
    out = model._postprocess_one(pred, META)
    unit = F.normalize(pred, dim=1, eps=1e-8)[:, :, 0:6, 2:6]
    expected = F.interpolate(unit, size=(10, 8), mode='bilinear',
                             align_corners=False)[0]
    assert torch.allclose(out, expected, atol=1e-6)


def test_albedo_postprocess_clamps():
    model = build_estimator('albedo')
    pred = torch.randn(1, 3, 9, 7) * 3
    out = model._postprocess_one(pred, META)
    expected = F.interpolate(pred.clamp(0, 1)[:, :, 0:6, 2:6], size=(10, 8),
                             mode='bilinear', align_corners=False)[0]
    assert torch.allclose(out, expected, atol=1e-6)


def blur_by_hand(x, sigma=0.8):
    """One 3x3 Gaussian pass with reflect-101 borders, loops in numpy."""
    g = np.exp(-np.array([1.0, 0.0, 1.0]) / (2 * sigma * sigma))
    k = np.outer(g, g) / np.outer(g, g).sum()
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1)), mode='reflect')
    out = np.zeros_like(x)
    for i in range(x.shape[1]):
        for j in range(x.shape[2]):
            out[:, i, j] = (padded[:, i:i + 3, j:j + 3] * k).sum((1, 2))
    return out


def test_pointmap_postprocess_blurs_only_when_upsampling():
    model = build_estimator('pointmap')
    pred = torch.randn(1, 3, 9, 7, dtype=torch.float64)
    crop = pred[:, :, 0:6, 2:6].numpy()[0]
    blurred = crop
    for _ in range(4):
        blurred = blur_by_hand(blurred)
    out = model._postprocess_one(pred, META)  # 6x4 -> 10x8: upsampling
    expected = F.interpolate(torch.from_numpy(blurred)[None], size=(10, 8),
                             mode='bilinear', align_corners=False)[0]
    assert torch.allclose(out, expected, atol=1e-10)
    down = model._postprocess_one(pred, dict(META, ori_shape=(3, 2)))
    expected = F.interpolate(torch.from_numpy(crop)[None], size=(3, 2),
                             mode='bilinear', align_corners=False)[0]
    assert torch.allclose(down, expected, atol=1e-10)
