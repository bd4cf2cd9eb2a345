"""Crash-safe checkpoint writes are chosen per run, not for the process:
mmengine's 'local' backend (every other write of the process) stays
mmengine's; the shipped configs' CheckpointHook names AtomicLocalBackend,
and tools/train.py gives it to a config whose hook names no backend."""
from pathlib import Path

import pytest
from mmengine.config import Config
from mmengine.fileio import LocalBackend, get_file_backend

from sapiens_mm.engine.fileio import (ATOMIC_BACKEND, AtomicLocalBackend,
                                      use_atomic_checkpoints)

ROOT = Path(__file__).resolve().parents[2]


def test_local_paths_keep_mmengines_backend(tmp_path):
    assert type(get_file_backend(str(tmp_path / 'a.pth'))) is LocalBackend
    assert type(get_file_backend(
        str(tmp_path / 'a.pth'),
        backend_args=dict(backend=ATOMIC_BACKEND))) is AtomicLocalBackend


@pytest.mark.parametrize('config', [
    'configs/pose/goliath/sapiens_tiny-210e_goliath-256x192.py',
    'configs/seg/goliath/sapiens_tiny-200e_goliath-256x192.py',
    'configs/depth/sapiens_tiny-200e_depth_folder-256x192.py',
    'configs/sapiens2/seg/sapiens2_tiny-dome29-256x192.py',
    'configs/pretrain/sapiens_tiny-mae-1600e_humans-128x128.py',
])
def test_shipped_configs_write_checkpoints_atomically(config):
    cfg = Config.fromfile(str(ROOT / config))
    assert cfg.default_hooks.checkpoint.backend_args == dict(
        backend=ATOMIC_BACKEND)
    assert use_atomic_checkpoints(cfg) is False  # already chosen


def test_train_tool_chooses_it_where_the_config_names_no_backend():
    cfg = Config(dict(default_hooks=dict(checkpoint=dict(
        type='CheckpointHook', interval=1))))
    assert use_atomic_checkpoints(cfg) is True
    assert cfg.default_hooks.checkpoint.backend_args == dict(
        backend=ATOMIC_BACKEND)
    own = Config(dict(default_hooks=dict(checkpoint=dict(
        type='CheckpointHook', backend_args=dict(backend='petrel')))))
    assert use_atomic_checkpoints(own) is False
    assert own.default_hooks.checkpoint.backend_args == dict(
        backend='petrel')
    assert use_atomic_checkpoints(Config(dict())) is False


def test_runner_checkpoints_go_through_the_atomic_backend(tmp_path,
                                                          monkeypatch):
    from cluster_helpers import ToyData, ToyModel
    from mmengine.runner import Runner
    writes = []
    real = AtomicLocalBackend.put
    monkeypatch.setattr(AtomicLocalBackend, 'put',
                        lambda self, obj, path: writes.append(path) or
                        real(self, obj, path))
    loader = dict(dataset=ToyData(n=4), batch_size=2, num_workers=0,
                  sampler=dict(type='DefaultSampler', shuffle=False),
                  collate_fn=dict(type='default_collate'))
    Runner(model=ToyModel(), work_dir=str(tmp_path),
           train_dataloader=loader,
           optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.01)),
           train_cfg=dict(by_epoch=True, max_epochs=1),
           default_hooks=dict(checkpoint=dict(
               type='CheckpointHook', interval=1,
               backend_args=dict(backend=ATOMIC_BACKEND))),
           experiment_name=f'atomic_{tmp_path.name}',
           default_scope='mmengine').train()
    assert writes == [str(tmp_path / 'epoch_1.pth')]
