"""Pointmap / albedo metrics against hand computations; the Sapiens2 dense
post-processing against the official steps done by hand."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from sapiens_mm.evaluation import SapiensAlbedoMetric, SapiensPointmapMetric


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
