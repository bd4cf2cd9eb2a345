"""A few training iterations on generated data lower each loss; the tiny
configs train and validate end to end with mmengine's Runner.

A few training iterations of each tiny Sapiens2 task model, with the
config's optimizer (AdamW + layer decay + clipping), lower its loss on a
fixed batch.
"""
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.dataset import pseudo_collate
from mmengine.optim import build_optim_wrapper
from mmengine.registry import init_default_scope
from mmengine.runner import Runner
from mmseg.registry import DATASETS, MODELS
from sapiens2_helpers import LEAF, build_tiny, dense_samples, pose_samples

from sapiens_mm.datasets.synthetic import write_dataset

ROOT = Path(__file__).resolve().parents[2]


def tiny_config(task):
    return Config.fromfile(str(
        ROOT / f'configs/{task}/sapiens_tiny-200e_{task}_folder-256x192.py'))


@pytest.fixture(scope='module')
def synthetic(tmp_path_factory):
    root = tmp_path_factory.mktemp('dense_synthetic')
    write_dataset(root, num_train=2, num_val=1, seed=1, size=(64, 48),
                  progress=False)
    return root


@pytest.mark.parametrize('task', ['depth', 'normal'])
def test_few_iterations_lower_the_loss(task, synthetic):
    init_default_scope('mmseg')
    cfg = tiny_config(task)
    # the shipped pipeline and model at 64x48 with a 16-channel head
    size = (64, 48)
    cfg.model.data_preprocessor.size = size
    cfg.model.backbone.img_size = size
    cfg.model.decode_head.update(
        channels=16, deconv_out_channels=(16, ) * len(
            cfg.model.decode_head.deconv_out_channels),
        conv_out_channels=(16, ) * len(cfg.model.decode_head.conv_out_channels),
        dropout_ratio=0.0)
    pipeline = [dict(type='LoadImageFromFile'),
                dict(type='LoadDenseAnnotations'),
                dict(type='Resize', scale=(48, 64), keep_ratio=False),
                dict(type='DenseRandomFlip', prob=0.5),
                dict(type=f'Generate{task.capitalize()}Target'),
                dict(type='PackDenseInputs')]
    dataset = DATASETS.build(dict(cfg.train_dataloader.dataset,
                                  data_root=str(synthetic),
                                  pipeline=pipeline))
    torch.manual_seed(0)
    np.random.seed(0)  # the random flip
    batch = pseudo_collate([dataset[0], dataset[1]])
    model = MODELS.build(cfg.model)
    model.init_weights()
    optim = build_optim_wrapper(model, dict(
        cfg.optim_wrapper, optimizer=dict(cfg.optim_wrapper.optimizer,
                                          lr=1e-3)))
    names = (['decode.loss_silog'] if task == 'depth' else
             ['decode.loss_cos', 'decode.loss_l1'])
    history = {k: [] for k in names}
    for _ in range(20):
        log_vars = model.train_step(batch, optim)
        for k in names:
            history[k].append(float(log_vars[k]))
    for k, values in history.items():
        assert all(torch.isfinite(torch.tensor(values))), k
        # the L1 term falls slowest (outputs start near 0; grad clip 1.0)
        assert values[-1] < 0.95 * values[0], (k, values)


@pytest.mark.slow
@pytest.mark.parametrize('task', ['depth', 'normal'])
def test_tiny_config_trains_and_validates_with_runner(task, synthetic,
                                                      tmp_path):
    cfg = tiny_config(task)
    cfg.work_dir = str(tmp_path / 'work')
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[loader].update(batch_size=1, num_workers=0,
                           persistent_workers=False)
        cfg[loader].dataset.data_root = str(synthetic)
    # shipped config, with a 16-channel head to keep the CPU run short
    head = cfg.model.decode_head
    head.update(channels=16,
                deconv_out_channels=(16, ) * len(head.deconv_out_channels),
                conv_out_channels=(16, ) * len(head.conv_out_channels))
    cfg.train_cfg.update(max_epochs=1, val_interval=2)  # validate below
    cfg.param_scheduler = [dict(type='ConstantLR', factor=1.0)]
    cfg.default_hooks.logger.interval = 1
    cfg.default_hooks.checkpoint.save_best = None
    cfg.val_evaluator.output_dir = str(tmp_path / 'preds')
    runner = Runner.from_cfg(cfg)
    runner.train()
    metrics = runner.val()
    keys = (['depth/abs_rel', 'depth/delta1', 'depth/silog']
            if task == 'depth' else
            ['normal/mean', 'normal/median', 'normal/within_11.25'])
    for k in keys:
        assert k in metrics and metrics[k] == metrics[k]  # not NaN
    saved = list((tmp_path / 'preds').glob('*.npy'))
    assert len(saved) == 1
    assert (tmp_path / 'work' / 'epoch_1.pth').exists()


@pytest.mark.slow
@pytest.mark.parametrize('task', sorted(LEAF))
def test_sapiens2_few_iterations_lower_the_loss(task):
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
    from sapiens_mm.engine.optimizers.layer_decay_optim_wrapper_constructor import (
        get_layer_id,
        is_no_decay,
    )
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
