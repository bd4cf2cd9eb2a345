"""Sapiens2 losses against hand computations."""
import numpy as np
import pytest
import torch

from sapiens_mm.models.losses import (AlbedoLoss, BodyPartDiceLoss,
                                      NormalGradLoss, PointmapLoss,
                                      pointmap_normals)
from sapiens_mm.utils.pointcloud import backproject


def dice_by_hand(logits, label, ignore=255, eps=1e-3):
    """Per-image, per-class loops in numpy."""
    prob = np.exp(logits - logits.max(1, keepdims=True))
    prob /= prob.sum(1, keepdims=True)
    losses = []
    for n in range(len(label)):
        terms = []
        for c in range(1, logits.shape[1]):
            keep = label[n] != ignore
            g = (label[n] == c) & keep
            if not g.any():
                continue
            p = prob[n, c][keep]
            gg = g[keep].astype(float)
            dice = 2 * (p * gg).sum() / ((p * p).sum() + (gg * gg).sum() +
                                         2 * eps)
            terms.append(1 - dice)
        losses.append(np.mean(terms) if terms else 0.0)
    return np.mean(losses)


def test_dice_loss_against_hand_computation():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 4, 5, 6))
    label = rng.integers(0, 4, size=(3, 5, 6))
    label[0, :2] = 255
    label[2] = 0  # background only: contributes 0
    loss = BodyPartDiceLoss()(torch.tensor(logits), torch.tensor(label))
    assert loss.item() == pytest.approx(dice_by_hand(logits, label),
                                        rel=1e-9)  # float64 throughout


def test_dice_loss_is_near_zero_for_a_confident_correct_prediction():
    label = torch.tensor([[[0, 1], [2, 2]]])
    logits = torch.nn.functional.one_hot(label, 3).permute(0, 3, 1, 2) * 50.0
    assert BodyPartDiceLoss()(logits.double(), label).item() < 1e-3


def test_normal_grad_loss_against_hand_computation():
    target = torch.zeros(1, 3, 2, 3)
    target[0, 2] = 1.0  # (0, 0, 1) everywhere: zero gradients
    pred = target.clone()
    pred[0, 0, 0, 1] = 0.5  # one bump in X at (row 0, col 1)
    # x-differences on row 0: +0.5, -0.5; row 1: 0, 0 -> 4 pairs
    # y-differences: column 1: -0.5; others 0 -> 3 pairs
    expected = (0.25 + 0.25) / 4 + 0.25 / 3
    assert NormalGradLoss()(pred, target).item() == pytest.approx(expected)
    # an invalid pixel removes its pairs: invalidating (1, 1) leaves the
    # two x pairs of row 0 and the y pairs of columns 0 and 2 (error 0)
    target[0, :, 1, 1] = 0
    pred[0, :, 1, 1] = 9.0
    expected = (0.25 + 0.25) / 2 + 0.0 / 2
    assert NormalGradLoss()(pred, target).item() == pytest.approx(expected)


def test_albedo_loss_terms_against_hand_computation():
    target = torch.full((1, 3, 1, 2), 0.5)
    target[0, :, 0, 1] = -1  # invalid pixel
    pred = torch.tensor([[[[0.7, 3.0]], [[0.5, 3.0]], [[0.2, 3.0]]]])
    l1 = AlbedoLoss('l1', loss_weight=2.0)(pred, target)
    assert l1.item() == pytest.approx(2.0 * (0.2 + 0.0 + 0.3))
    eps = 1e-3
    chroma_p = (np.array([0.7, 0.5, 0.2]) + eps) / (1.4 + 3 * eps)
    chroma_t = np.full(3, 1 / 3)
    chroma = AlbedoLoss('chromaticity')(pred, target)
    assert chroma.item() == pytest.approx(np.abs(chroma_p - chroma_t).sum(),
                                          rel=1e-5)
    # one valid pixel: no pair of valid neighbours
    assert AlbedoLoss('grad')(pred, target).item() == 0.0
    with pytest.raises(ValueError, match='term must be'):
        AlbedoLoss('l2')


def plane_pointmap(h=8, w=6, z=2.0, f=10.0):
    K = np.array([[f, 0, (w - 1) / 2], [0, f, (h - 1) / 2], [0, 0, 1]])
    points = backproject(np.full((h, w), z), K)
    return torch.from_numpy(points).permute(2, 0, 1)[None].double(), K


def test_pointmap_normals_of_a_fronto_parallel_plane():
    points, _ = plane_pointmap()
    normals, ok = pointmap_normals(points, torch.ones(1, 8, 6, dtype=bool))
    assert ok.all()
    expected = torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64)
    assert torch.allclose(normals[0].permute(1, 2, 0), expected)


def test_pointmap_loss_is_zero_at_the_target_and_grows_with_errors():
    points, K = plane_pointmap()
    scale = 0.5
    target = points * scale
    intr = torch.tensor([[K[0, 0], K[1, 1], K[0, 2], K[1, 2]]])
    loss_fn = PointmapLoss()
    losses = loss_fn(target.clone(), torch.tensor([scale]).double(), target,
                     torch.tensor([scale]).double(), intr)
    assert set(losses) == {
        'loss_pm_l1', 'loss_pm_multiscale', 'loss_pm_silog',
        'loss_pm_intrinsics', 'loss_pm_shift_l1', 'loss_pm_normal',
        'loss_pm_scale'}
    for name, value in losses.items():
        assert abs(value.item()) < 1e-9, name  # float64 throughout
    # A constant shift of d along X: the L1 term is 2 * d / mean depth, the
    # shift-invariant term stays 0, the scale term is 4 * |ds|.
    d = 0.1
    pred = target.clone()
    pred[:, 0] += d
    losses = loss_fn(pred, torch.tensor([scale + 0.25]).double(), target,
                     torch.tensor([scale]).double(), intr)
    mean_depth = 2.0 * scale
    assert losses['loss_pm_l1'].item() == pytest.approx(2 * d / mean_depth)
    assert losses['loss_pm_multiscale'].item() == pytest.approx(
        2 * d / mean_depth)  # two pooled scales, same error
    assert abs(losses['loss_pm_shift_l1'].item()) < 1e-9
    assert losses['loss_pm_scale'].item() == pytest.approx(4 * 0.25)
    # rays: X/Z is off by d / Z for every pixel
    assert losses['loss_pm_intrinsics'].item() == pytest.approx(
        d / mean_depth)


def test_pointmap_loss_skips_unknown_cameras_and_invalid_pixels():
    points, K = plane_pointmap()
    target = points.clone()
    target[:, :, :4] = 0  # top half invalid
    pred = target + 0.2 * (target != 0)
    pred[:, :, :4] = 100.0  # ignored
    losses = PointmapLoss(multiscale_weight=0, silog_weight=0,
                          normal_weight=0)(
        pred, torch.tensor([1.0]).double(), target,
        torch.tensor([float('nan')]).double(),
        torch.full((1, 4), float('nan')).double())
    assert 'loss_pm_silog' not in losses
    assert losses['loss_pm_scale'].item() == 0.0
    assert losses['loss_pm_intrinsics'].item() == 0.0
    # valid pixels: 0.2 off in each of the 3 channels, over the mean depth 2
    assert losses['loss_pm_l1'].item() == pytest.approx(2 * 3 * 0.2 / 2.0)
    # the clamp: an error of 3 * 10 / 2 = 15 per pixel counts as 4
    far = target + 10.0 * (target != 0)
    clamped = PointmapLoss(multiscale_weight=0)(
        far, torch.tensor([1.0]).double(), target,
        torch.tensor([1.0]).double(), torch.tensor([[10.0, 10, 2.5,
                                                     3.5]]).double())
    assert clamped['loss_pm_l1'].item() == pytest.approx(2 * 4.0)
