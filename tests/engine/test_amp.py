import pytest
import torch
import torch.nn as nn
from mmengine.optim import build_optim_wrapper


def test_autocast_optim_wrapper_runs_bf16_and_updates():
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
    wrapper = build_optim_wrapper(model, dict(
        type='AutocastOptimWrapper', dtype='bfloat16',
        optimizer=dict(type='SGD', lr=0.1)))
    before = model[0].weight.detach().clone()
    with wrapper.optim_context(model):
        out = model(torch.randn(4, 8))
    assert out.dtype == torch.bfloat16
    wrapper.update_params(out.float().square().mean())
    assert model[0].weight.dtype == torch.float32
    assert not torch.equal(model[0].weight, before)


def test_autocast_optim_wrapper_rejects_bad_dtype():
    with pytest.raises(ValueError, match='bfloat16'):
        build_optim_wrapper(nn.Linear(2, 2), dict(
            type='AutocastOptimWrapper', dtype='int8',
            optimizer=dict(type='SGD', lr=0.1)))
