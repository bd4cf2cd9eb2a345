"""Depth SiLog and scale-and-shift-invariant, and normal (1 - cos) / L1
losses against numpy."""
import numpy as np
import pytest
import torch
from mmseg.registry import MODELS


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
