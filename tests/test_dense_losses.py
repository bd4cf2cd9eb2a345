"""Depth SiLog and normal (1 - cos) / L1 losses against numpy."""
import numpy as np
import pytest
import torch
from mmseg.registry import MODELS


def silog_numpy(pred, target, eps=1e-6):
    """Official formula, one image at a time, 0 for an empty image."""
    losses = []
    for p, t in zip(pred.reshape(len(pred), -1), target.reshape(
            len(target), -1)):
        valid = t > eps
        if not valid.any():
            losses.append(0.0)
            continue
        d = np.log(t[valid]) - np.log(np.maximum(p[valid], eps))
        losses.append(np.sqrt(np.mean(d**2) - 0.5 * np.mean(d)**2))
    return np.array(losses)


def _depth_batch():
    rng = np.random.default_rng(0)
    target = rng.uniform(0.05, 1.0, (3, 1, 4, 5))
    target[0, 0, :2] = -1.0  # background
    target[0, 0, 2, 0] = 0.0  # nearest foreground pixel: not valid
    target[1] = -1.0  # all background
    pred = rng.uniform(0.05, 1.2, (3, 1, 4, 5))
    pred[2, 0, 0, :2] = -0.3  # negative predictions are clamped
    return pred, target


def test_silog_equals_numpy_per_image_and_reduced():
    pred, target = _depth_batch()
    expected = silog_numpy(pred, target)
    assert expected[1] == 0.0 and expected[0] > 0 and expected[2] > 0
    loss = MODELS.build(dict(type='DepthSiLogLoss', reduction='none'))
    got = loss(torch.tensor(pred), torch.tensor(target))
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-10)
    mean = MODELS.build(dict(type='DepthSiLogLoss', loss_weight=2.0))
    # official: mean over the batch, empty images count as 0
    np.testing.assert_allclose(
        mean(torch.tensor(pred), torch.tensor(target)).item(),
        2.0 * expected.mean(), rtol=1e-10)


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
