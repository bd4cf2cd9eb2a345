"""A few training iterations of each tiny Sapiens2 task model, with the
config's optimizer (AdamW + layer decay + clipping), lower its loss on a
fixed batch."""
import pytest
import torch
from mmengine.optim import build_optim_wrapper
from sapiens2_helpers import LEAF, build_tiny, dense_samples, pose_samples


@pytest.mark.parametrize('task', sorted(LEAF))
def test_few_iterations_lower_the_loss(task):
    torch.manual_seed(0)
    cfg, model = build_tiny(task)
    H, W = cfg.image_size
    inputs = torch.randn(2, 3, H, W)
    samples = (pose_samples(H, W) if task == 'pose' else
               dense_samples(task, H, W))
    optim_cfg = cfg.optim_wrapper.copy()
    optim_cfg.optimizer.lr = 2e-3  # no warm-up here; a few big steps
    optim = build_optim_wrapper(model, optim_cfg)
    model.train()
    totals = []
    for _ in range(10):
        losses = model(inputs, samples, mode='loss')
        loss, _ = model.parse_losses(losses)
        optim.update_params(loss)
        totals.append(loss.item())
    # 10 steps on the same batch: the last loss must be
    # clearly (> 5 %) below the first
    assert totals[-1] < 0.95 * totals[0], totals
