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


def write_pointmap_split(root, n=2, h=120, w=96):
    """Images, masks and metric pointmaps of a sphere-capped person blob
    (camera fx = fy = 150, 2-3 m away)."""
    import cv2
    import numpy as np

    from sapiens_mm.utils.pointcloud import backproject
    for sub in ('images', 'masks', 'pointmaps'):
        (root / sub).mkdir(parents=True)
    v, u = np.mgrid[:h, :w]
    K = np.array([[150.0, 0, w / 2], [0, 150.0, h / 2], [0, 0, 1]])
    for i in range(n):
        r2 = ((u - w / 2) / (w / 3))**2 + ((v - h / 2) / (h / 2.5))**2
        mask = (r2 < 1).astype(np.uint8)
        depth = 2.5 + 0.2 * i - 0.3 * np.sqrt(np.clip(1 - r2, 0, 1))
        img = np.where(mask[..., None] > 0, [60, 140, 220], [30, 30, 30])
        cv2.imwrite(str(root / f'images/{i}.png'), img.astype(np.uint8))
        cv2.imwrite(str(root / f'masks/{i}.png'), mask)
        np.save(root / f'pointmaps/{i}.npy',
                backproject(depth, K).astype(np.float32))


def test_tiny_pointmap_config_trains_validates_and_tests_with_runner(
        tmp_path):
    """The shipped tiny pointmap config end to end through mmengine's
    Runner: folder dataset, official pipelines, PointmapLoss, the
    iteration-based schedule, SapiensPointmapMetric."""
    import math

    from mmengine.config import Config
    from mmengine.runner import Runner
    from sapiens2_helpers import leaf
    for split in ('train', 'val'):
        write_pointmap_split(tmp_path / 'data' / split)
    cfg = Config.fromfile(str(leaf('pointmap', 'tiny')))
    cfg.work_dir = str(tmp_path / 'work')
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[loader].update(batch_size=1, num_workers=0,
                           persistent_workers=False)
        cfg[loader].dataset.data_root = str(tmp_path / 'data')
    cfg.train_cfg.update(max_iters=2, val_interval=2)
    # the shipped warm-up + PolyLR, shortened to the run
    cfg.param_scheduler[0].end = 1
    cfg.param_scheduler[1].update(begin=1, end=2)
    cfg.default_hooks.logger.interval = 1
    cfg.default_hooks.checkpoint.update(interval=2, save_best=None)
    runner = Runner.from_cfg(cfg)
    runner.train()
    metrics = runner.test()
    for key in ('pointmap/l2_mean', 'pointmap/depth_abs_rel',
                'pointmap/within_0.2', 'pointmap/raw_l2_mean'):
        assert key in metrics and math.isfinite(metrics[key]), key
    assert (tmp_path / 'work' / 'iter_2.pth').exists()
