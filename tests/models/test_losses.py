"""Depth SiLog and scale-and-shift-invariant, and normal (1 - cos) / L1
losses against numpy.

Sapiens2 losses against hand computations.
"""
import numpy as np
import pytest
import torch
from mmseg.registry import MODELS

from sapiens_mm.models.losses import (
    AlbedoLoss,
    BodyPartDiceLoss,
    NormalGradLoss,
    PointmapLoss,
    pointmap_normals,
)
from sapiens_mm.utils.pointcloud import backproject


def _per_image_numpy(pred, target, loss, eps=1e-6):
    """``loss(p, t)`` over each image's valid pixels, 0 for an empty image."""
    losses = []
    for p, t in zip(pred.reshape(len(pred), -1), target.reshape(
            len(target), -1)):
        valid = t > eps
        losses.append(loss(p[valid], t[valid]) if valid.any() else 0.0)
    return np.array(losses)


def silog_numpy(pred, target, eps=1e-6):
    """Official formula, one image at a time."""

    def silog(p, t):
        d = np.log(t) - np.log(np.maximum(p, eps))
        return np.sqrt(np.mean(d**2) - 0.5 * np.mean(d)**2)

    return _per_image_numpy(pred, target, silog, eps)


def _depth_batch():
    rng = np.random.default_rng(0)
    target = rng.uniform(0.05, 1.0, (3, 1, 4, 5))
    target[0, 0, :2] = -1.0  # background
    target[0, 0, 2, 0] = 0.0  # nearest foreground pixel: not valid
    target[1] = -1.0  # all background
    pred = rng.uniform(0.05, 1.2, (3, 1, 4, 5))
    pred[2, 0, 0, :2] = -0.3  # negative predictions are clamped
    return pred, target


def test_silog_all_background_batch_is_zero_with_finite_grad():
    loss = MODELS.build(dict(type='DepthSiLogLoss'))
    pred = torch.rand(2, 1, 4, 5, requires_grad=True)
    value = loss(pred, torch.full((2, 1, 4, 5), -1.0))
    assert value.item() == 0.0
    value.backward()
    assert torch.isfinite(pred.grad).all() and (pred.grad == 0).all()
    # a perfect prediction is also 0 with a finite gradient (sqrt at 0)
    target = torch.rand(1, 1, 3, 3) + 0.1
    pred = target.clone().requires_grad_(True)
    value = loss(pred, target)
    value.backward()
    assert value.item() == 0.0 and torch.isfinite(pred.grad).all()


def test_silog_gradient_and_bad_arguments():
    pred, target = _depth_batch()
    p = torch.tensor(pred, requires_grad=True)
    MODELS.build(dict(type='DepthSiLogLoss'))(p, torch.tensor(target)).backward()
    assert torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0
    with pytest.raises(ValueError, match='same shape'):
        MODELS.build(dict(type='DepthSiLogLoss'))(
            torch.rand(1, 1, 4, 4), torch.rand(1, 1, 2, 2))
    with pytest.raises(ValueError, match='variance_focus'):
        MODELS.build(dict(type='DepthSiLogLoss', variance_focus=2.0))


def scale_shift_rmse_numpy(pred, target, eps=1e-6):
    """Independent reference: np.polyfit's least-squares line from pred to
    target over the valid pixels, then the RMSE of what is left."""

    def rmse(p, t):
        s, b = np.polyfit(p, t, 1)
        return np.sqrt(np.mean((s * p + b - t)**2))

    return _per_image_numpy(pred, target, rmse, eps)


@pytest.mark.parametrize('name,reference,rtol', [
    ('DepthSiLogLoss', silog_numpy, 1e-10),
    ('DepthScaleShiftLoss', scale_shift_rmse_numpy, 1e-6),
])
def test_depth_losses_equal_numpy_per_image_and_reduced(
        name, reference, rtol):
    pred, target = _depth_batch()
    expected = reference(pred, target)
    assert expected[1] == 0.0 and expected[0] > 0 and expected[2] > 0
    loss = MODELS.build(dict(type=name, reduction='none'))
    got = loss(torch.tensor(pred), torch.tensor(target))
    np.testing.assert_allclose(got.numpy(), expected, rtol=rtol)
    mean = MODELS.build(dict(type=name, loss_weight=2.0))
    # official: mean over the batch, empty images count as 0
    np.testing.assert_allclose(
        mean(torch.tensor(pred), torch.tensor(target)).item(),
        2.0 * expected.mean(), rtol=rtol)


def test_scale_shift_loss_ignores_invalid_pixels():
    pred, target = _depth_batch()
    expected = scale_shift_rmse_numpy(pred, target)
    loss = MODELS.build(dict(type='DepthScaleShiftLoss', reduction='none'))
    # predictions on background / invalid pixels change nothing
    other = pred.copy()
    other[target <= 1e-6] = 123.0
    np.testing.assert_allclose(
        loss(torch.tensor(other), torch.tensor(target)).numpy(), expected,
        rtol=1e-6)


def test_scale_shift_loss_invariance_and_constant_prediction():
    loss = MODELS.build(dict(type='DepthScaleShiftLoss', reduction='none'))
    target = torch.rand(2, 1, 6, 5, dtype=torch.float64) + 0.1
    target[:, :, 0] = -1.0
    # any positive or negative scale and any shift of the target: loss 0
    for scale, shift in ((3.0, -7.0), (-0.5, 2.0)):
        pred = (scale * target + shift).requires_grad_(True)
        value = loss(pred, target)
        assert value.abs().max().item() < 1e-6
        value.sum().backward()
        assert torch.isfinite(pred.grad).all()
    # a constant prediction leaves the target's standard deviation, with a
    # finite gradient (no structure to scale: the fitted scale is 0)
    pred = torch.zeros_like(target, requires_grad=True)
    value = loss(pred, target)
    valid = target[:, 0, 1:].reshape(2, -1)
    np.testing.assert_allclose(value.detach().numpy(),
                               valid.std(dim=1, unbiased=False).numpy(),
                               rtol=1e-9)
    value.sum().backward()
    assert torch.isfinite(pred.grad).all()


def test_scale_shift_loss_empty_batch_and_bad_arguments():
    loss = MODELS.build(dict(type='DepthScaleShiftLoss'))
    pred = torch.rand(2, 1, 4, 5, requires_grad=True)
    value = loss(pred, torch.full((2, 1, 4, 5), -1.0))
    value.backward()
    assert value.item() == 0.0 and (pred.grad == 0).all()
    with pytest.raises(ValueError, match='same shape'):
        loss(torch.rand(1, 1, 4, 4), torch.rand(1, 1, 2, 2))
    with pytest.raises(ValueError, match='reduction'):
        MODELS.build(dict(type='DepthScaleShiftLoss', reduction='avg'))


def _normal_batch():
    rng = np.random.default_rng(1)
    target = rng.normal(size=(2, 3, 3, 4))
    target /= np.linalg.norm(target, axis=1, keepdims=True)
    target[0, :, 0, :] = 0.0  # background row
    pred = rng.normal(size=(2, 3, 3, 4)) * 0.7
    return pred, target


def normal_losses_numpy(pred, target):
    p = pred.transpose(0, 2, 3, 1).reshape(-1, 3)
    t = target.transpose(0, 2, 3, 1).reshape(-1, 3)
    valid = np.linalg.norm(t, axis=1) > 1e-6
    p, t = p[valid], t[valid]
    cos = (p * t).sum(1) / np.linalg.norm(p, axis=1) / np.linalg.norm(t,
                                                                       axis=1)
    return np.mean(1 - cos), np.mean(np.abs(p - t).sum(1))


def test_normal_losses_equal_numpy():
    pred, target = _normal_batch()
    cos_ref, l1_ref = normal_losses_numpy(pred, target)
    cos = MODELS.build(dict(type='NormalCosineLoss'))
    l1 = MODELS.build(dict(type='NormalL1Loss', loss_weight=0.5))
    assert cos.loss_name == 'loss_cos' and l1.loss_name == 'loss_l1'
    p, t = torch.tensor(pred), torch.tensor(target)
    np.testing.assert_allclose(cos(p, t).item(), cos_ref, rtol=1e-10)
    np.testing.assert_allclose(l1(p, t).item(), 0.5 * l1_ref, rtol=1e-10)


def test_normal_losses_all_background_batch_is_zero():
    pred = torch.randn(2, 3, 4, 4, requires_grad=True)
    target = torch.zeros(2, 3, 4, 4)
    for cfg in (dict(type='NormalCosineLoss'), dict(type='NormalL1Loss')):
        value = MODELS.build(cfg)(pred, target)
        assert value.item() == 0.0 and not torch.isnan(value)
        value.backward()
        assert torch.isfinite(pred.grad).all()
    with pytest.raises(ValueError, match=r'\(N, 3, H, W\)'):
        MODELS.build(dict(type='NormalL1Loss'))(torch.rand(1, 1, 2, 2),
                                                torch.rand(1, 1, 2, 2))


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
