"""A few training iterations on generated data lower each loss; the tiny
configs train and validate end to end with mmengine's Runner."""
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
