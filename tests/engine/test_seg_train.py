"""Training the tiny goliath seg config on synthetic people."""
import copy
import itertools
from pathlib import Path

import mmcv
import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.optim import build_optim_wrapper
from mmengine.registry import init_default_scope
from mmengine.runner import Runner, set_random_seed
from mmseg.registry import MODELS

from sapiens_mm.engine.runner_cfg import build_test_cfg
from sapiens_mm.datasets.synthetic import write_dataset
from sapiens_mm.zoo import safe_checkpoint_loading

CONFIG = str(Path(__file__).resolve().parents[2] / 'configs' / 'seg' /
             'goliath' / 'sapiens_tiny-200e_goliath-256x192.py')
SIZE = (128, 96)  # (H, W): the tiny config's 256x192 halved, for speed


@pytest.fixture(scope='module')
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp('people')
    # <split>/images + <split>/masks (goliath_28 ids)
    write_dataset(root, num_train=6, num_val=2, seed=0, size=SIZE,
                  progress=False)
    bg = root / 'backgrounds'
    bg.mkdir()
    for i in range(2):
        mmcv.imwrite(
            np.random.default_rng(i).integers(0, 255, (60, 90, 3)).astype(
                np.uint8), str(bg / f'bg{i}.jpg'))
    return root


def _cfg(data: Path, work_dir: Path) -> Config:
    cfg = Config.fromfile(CONFIG)
    bg = cfg.train_dataloader.dataset.pipeline[2]
    assert bg.type == 'RandomBackground'
    bg.background_root = str(data / 'backgrounds')
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[loader].update(num_workers=0, persistent_workers=False)
        cfg[loader].dataset.data_root = str(data)
    # same pipelines at SIZE
    h, w = SIZE
    cfg.model.data_preprocessor.size = SIZE
    cfg.model.backbone.img_size = SIZE
    for loader in ('train_dataloader', 'val_dataloader'):
        for t in cfg[loader].dataset.pipeline:
            if t.type in ('RandomResize', 'Resize'):
                t.scale = (w, h)
            elif t.type == 'RandomCrop':
                t.crop_size = SIZE
    cfg.test_dataloader = cfg.val_dataloader
    cfg.work_dir = str(work_dir)
    return cfg


@pytest.mark.slow
def test_few_iterations_lower_the_loss(data, tmp_path):
    init_default_scope('mmseg')
    set_random_seed(0)
    cfg = _cfg(data, tmp_path)
    # The config's optimizer (AdamW, layer decay, grad clip) with the lr
    # raised from 5e-4 so that a few iterations show progress.
    cfg.optim_wrapper.optimizer.lr = 2e-3
    train_loader = Runner.build_dataloader(cfg.train_dataloader, seed=0)
    # the training images without augmentation (test pipeline), one batch
    seen = copy.deepcopy(cfg.val_dataloader)
    seen.batch_size = 6
    seen.dataset.data_prefix = dict(img_path='train/images',
                                    seg_map_path='train/masks')
    fixed = next(iter(Runner.build_dataloader(seen, seed=0)))
    model = MODELS.build(cfg.model)
    model.init_weights()
    optim = build_optim_wrapper(model, cfg.optim_wrapper)

    def fixed_loss():
        model.eval()
        with torch.no_grad():
            batch = model.data_preprocessor(fixed, True)
            return model.loss(batch['inputs'],
                              batch['data_samples'])['decode.loss_ce'].item()

    before = fixed_loss()
    for batch in itertools.islice(itertools.cycle(train_loader), 20):
        model.train()
        log = model.train_step(batch, optim)
        assert torch.isfinite(log['loss'])
    after = fixed_loss()
    assert after < 0.92 * before, (before, after)  # seen: 1.037 -> 0.891


@pytest.mark.slow
def test_runner_train_val_and_test_from_checkpoint(data, tmp_path):
    """tools/train.py and tools/test.py path: one epoch with validation,
    a checkpoint, then evaluating it gives mIoU / mAcc / aAcc."""
    cfg = _cfg(data, tmp_path)
    cfg.train_cfg.update(max_epochs=1, val_interval=1)
    cfg.default_hooks.logger.interval = 1
    runner = Runner.from_cfg(cfg)
    runner.train()
    ckpt = tmp_path / 'epoch_1.pth'
    assert ckpt.is_file()
    assert list(tmp_path.glob('best_mIoU_epoch_1.pth'))

    cfg.dump(str(tmp_path / 'cfg.py'))
    test_cfg = build_test_cfg(str(tmp_path / 'cfg.py'), str(ckpt),
                              work_dir=str(tmp_path / 'test'))
    # tools/test.py reads the checkpoint (numpy meta) inside this block
    with safe_checkpoint_loading():
        metrics = Runner.from_cfg(test_cfg).test()
    assert set(metrics) == {'aAcc', 'mIoU', 'mAcc'}
    assert all(0 <= v <= 100 for v in metrics.values())
