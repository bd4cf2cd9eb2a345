"""tools/train.py and tools/test.py option handling."""
import subprocess
import sys
from pathlib import Path

import pytest

from sapiens_mm.apis import build_test_cfg, build_train_cfg

ROOT = Path(__file__).resolve().parents[1]
CFG = '''
model = dict(type='Foo')
optim_wrapper = dict(optimizer=dict(type='AdamW', lr=1e-3))
auto_scale_lr = dict(base_batch_size=512)
train_dataloader = dict(batch_size=2)
'''


@pytest.fixture
def cfg_path(tmp_path):
    p = tmp_path / 'my_cfg.py'
    p.write_text(CFG)
    return str(p)


def test_train_options(cfg_path):
    cfg = build_train_cfg(cfg_path)
    assert cfg.work_dir == './work_dirs/my_cfg'
    assert cfg.launcher == 'none' and not cfg.get('resume', False)

    cfg = build_train_cfg(cfg_path, work_dir='w', resume='auto', amp=True,
                          auto_scale_lr=True, launcher='slurm', seed=7,
                          deterministic=True,
                          cfg_options={'train_dataloader.batch_size': 8})
    assert cfg.work_dir == 'w' and cfg.launcher == 'slurm'
    assert cfg.resume is True and cfg.load_from is None
    # No CUDA here: bf16 autocast, since AmpOptimWrapper needs a GPU.
    assert cfg.optim_wrapper.type == 'AutocastOptimWrapper'
    assert cfg.optim_wrapper.dtype == 'bfloat16'
    assert cfg.auto_scale_lr.enable is True
    assert cfg.randomness == dict(seed=7, deterministic=True)
    assert cfg.train_dataloader.batch_size == 8

    cfg = build_train_cfg(cfg_path, resume='some/epoch_3.pth')
    assert cfg.resume is True and cfg.load_from == 'some/epoch_3.pth'


def test_auto_scale_lr_needs_base_batch_size(tmp_path):
    p = tmp_path / 'c.py'
    p.write_text("optim_wrapper = dict(optimizer=dict(type='SGD', lr=1))\n")
    with pytest.raises(ValueError, match='base_batch_size'):
        build_train_cfg(str(p), auto_scale_lr=True)


def test_test_options(cfg_path):
    cfg = build_test_cfg(cfg_path, 'ckpt.pth', work_dir='w2')
    assert cfg.load_from == 'ckpt.pth' and cfg.work_dir == 'w2'


@pytest.mark.parametrize('tool,flags', [
    ('train.py', ['--work-dir', '--resume', '--amp', '--auto-scale-lr',
                  '--seed', '--deterministic', '--cfg-options', '--launcher']),
    ('test.py', ['--work-dir', '--cfg-options', '--launcher']),
])
def test_help_lists_options(tool, flags):
    out = subprocess.run([sys.executable, str(ROOT / 'tools' / tool), '-h'],
                         capture_output=True, text=True, check=True).stdout
    for flag in flags:
        assert flag in out
