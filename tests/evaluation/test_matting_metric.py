"""SAD, MSE, Gradient and Connectivity errors (Rhemann et al. 2009) on
small hand-made alphas with known answers."""
import numpy as np
import pytest
import torch

from sapiens_mm.evaluation.metrics import (
    MattingMetric,
    connectivity_error,
    gradient_error,
    mse_error,
    sad_error,
    unknown_region,
)


def test_sad_and_mse_closed_form():
    gt = np.zeros((10, 12))
    gt[2:8, 3:9] = 1.0
    pred = np.clip(gt + 0.1, 0, 1)  # +0.1 on the 120 - 36 = 84 zeros
    assert sad_error(pred, gt) == pytest.approx(84 * 0.1 / 1000)
    assert mse_error(pred, gt) == pytest.approx(84 * 0.01 / 120)
    region = np.zeros_like(gt, bool)
    region[0, :5] = True  # 5 pixels, all off by 0.1
    assert sad_error(pred, gt, region) == pytest.approx(5 * 0.1 / 1000)
    assert mse_error(pred, gt, region) == pytest.approx(0.01)
    assert np.isnan(mse_error(pred, gt, np.zeros_like(region)))


def test_gradient_error_ramp():
    """gt a horizontal ramp 0..1, pred constant: away from the borders the
    gt gradient is |sum_ij G(i) G'(j) (j - h)| / ||G G'|| / (W - 1) per
    pixel (the filters are separable and G' is odd), the prediction's is
    0, so the error over the interior is n * that^2 / 1000."""
    H, W = 20, 41
    gt = np.tile(np.linspace(0, 1, W), (H, 1))
    pred = np.full_like(gt, 0.3)
    sigma = 1.4
    half = int(np.ceil(sigma * np.sqrt(
        -2 * np.log(np.sqrt(2 * np.pi) * sigma * 1e-2))))
    t = np.arange(-half, half + 1)
    g = np.exp(-t**2 / (2 * sigma**2))
    dg = -t * g
    slope = abs(g.sum() * (dg * t).sum()) / np.sqrt(
        (g**2).sum() * (dg**2).sum()) / (W - 1)
    interior = np.zeros_like(gt, bool)
    interior[half:-half, half:-half] = True
    expected = interior.sum() * slope**2 / 1000
    assert gradient_error(pred, gt, interior) == pytest.approx(expected,
                                                               rel=1e-9)
    # min-max normalised first: an affine change of the prediction is free
    assert gradient_error(0.5 * gt + 0.2, gt) == pytest.approx(0, abs=1e-12)


def test_connectivity_isolated_blob():
    """An isolated predicted pixel where gt is 0 is disconnected from the
    person: its level is 0, so phi(pred) = 1 - pred there and phi(gt) = 1;
    the error is that pixel's pred / 1000. A perfect prediction scores 0."""
    gt = np.zeros((7, 9))
    gt[1:6, 1:6] = 1.0
    assert connectivity_error(gt.copy(), gt) == 0.0
    pred = gt.copy()
    pred[3, 8] = 1.0
    assert connectivity_error(pred, gt) == pytest.approx(1 / 1000)
    pred[3, 8] = 0.5
    assert connectivity_error(pred, gt) == pytest.approx(0.5 / 1000)
    # below 0.15 over the level, the difference does not count
    pred[3, 8] = 0.1
    assert connectivity_error(pred, gt) == 0.0
    region = np.ones_like(gt, bool)
    region[3, 8] = False
    pred[3, 8] = 1.0
    assert connectivity_error(pred, gt, region) == 0.0


def test_unknown_region_is_dilated_soft_band():
    gt = np.zeros((9, 9))
    gt[4, 4] = 0.5
    band = unknown_region(gt, radius=2)
    expected = np.zeros_like(band)
    expected[2:7, 2:7] = True
    assert np.array_equal(band, expected)
    assert np.array_equal(unknown_region(gt, 0), gt == 0.5)


def test_matting_metric_averages_images():
    gt = np.zeros((12, 12), np.float32)
    gt[3:9, 3:9] = 1.0
    gt[3:9, 2] = 0.5  # a soft column
    perfect = dict(pred_alpha=dict(data=torch.from_numpy(gt)[None]),
                   gt_alpha=dict(data=torch.from_numpy(gt)[None]))
    off = gt.copy()
    off[0, 0] = 0.2  # outside the unknown band (radius 1)
    worse = dict(pred_alpha=dict(data=torch.from_numpy(off)[None]),
                 gt_alpha=dict(data=torch.from_numpy(gt)[None]))
    metric = MattingMetric(trimap_radius=1)
    metric.process({}, [perfect, worse])
    out = metric.compute_metrics(metric.results)
    assert out['sad'] == pytest.approx(0.2 / 1000 / 2)
    assert out['mse'] == pytest.approx(0.04 / 144 / 2)
    assert out['sad_unknown'] == 0.0 and out['mse_unknown'] == 0.0
    assert set(out) == {f'{k}{s}' for k in ('sad', 'mse', 'grad', 'conn')
                        for s in ('', '_unknown')}
