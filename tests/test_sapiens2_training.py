"""A few training iterations of each tiny Sapiens2 task model, with the
config's optimizer (AdamW + layer decay + clipping), lower its loss on a
fixed batch."""
import pytest
import torch
from mmengine.optim import build_optim_wrapper
from sapiens2_helpers import LEAF, build_tiny, dense_samples, pose_samples


@pytest.mark.slow
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


def test_layer_decay_groups_follow_the_official_table():
    """Fact sheet §6: ids 0 (tokens, patch embedding, tokenizer), i + 1
    (blocks.i), L + 1 (final norm, head); the CLS and register tokens (3-D)
    get weight decay, 1-D tensors and biases none."""
    from sapiens_mm.engine.optimizers.layer_decay_optim_wrapper_constructor \
        import get_layer_id, is_no_decay
    L = 24
    for name in ('backbone.cls_token', 'backbone.storage_tokens',
                 'backbone.patch_embed.projection.weight',
                 'backbone.tokenizer.blocks.0.attn.wq.weight'):
        assert get_layer_id(name, L) == 0, name
    assert get_layer_id('backbone.blocks.7.ffn.w12.weight', L) == 8
    assert get_layer_id('backbone.ln1.weight', L) == L + 1
    assert get_layer_id('decode_head.conv_seg.weight', L) == L + 1
    tokens = torch.nn.Parameter(torch.zeros(1, 8, 16))
    assert not is_no_decay('backbone.storage_tokens', tokens)
    assert is_no_decay('backbone.blocks.0.ln1.weight',
                       torch.nn.Parameter(torch.zeros(16)))
