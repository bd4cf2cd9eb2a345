"""tools/train.py and tools/test.py option handling."""
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tool_helpers import load_tool

from sapiens_mm.engine.runner_cfg import build_test_cfg, build_train_cfg

ROOT = Path(__file__).resolve().parents[2]
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

    ckpt = Path(cfg_path).with_name('epoch_3.pth')
    torch.save(dict(meta=dict(epoch=3, iter=12), message_hub={},
                    state_dict={}), str(ckpt))
    cfg = build_train_cfg(cfg_path, resume=str(ckpt))
    assert cfg.resume is True and cfg.load_from == str(ckpt)
    with pytest.raises(FileNotFoundError, match='--resume: checkpoint not '
                       'found: some/epoch_3.pth'):
        build_train_cfg(cfg_path, resume='some/epoch_3.pth')


def test_auto_scale_lr_needs_base_batch_size(tmp_path):
    p = tmp_path / 'c.py'
    p.write_text("optim_wrapper = dict(optimizer=dict(type='SGD', lr=1))\n")
    with pytest.raises(ValueError, match='base_batch_size'):
        build_train_cfg(str(p), auto_scale_lr=True)


def test_test_options(cfg_path):
    cfg = build_test_cfg(cfg_path, 'ckpt.pth', work_dir='w2')
    assert cfg.load_from == 'ckpt.pth' and cfg.work_dir == 'w2'
    assert [h['type'] for h in cfg.custom_hooks] == ['StrictLoadHook']


def test_test_loop_in_inference_form_gets_one_hook(cfg_path):
    """tools/test.py's default: one InferenceFormHook for the test loop;
    a config that has its own keeps it, without a second one."""
    cfg = build_test_cfg(cfg_path, 'ckpt.pth', inference_form=True)
    assert [h for h in cfg.custom_hooks
            if h['type'] == 'InferenceFormHook'] == [
                dict(type='InferenceFormHook', val=False)]
    own = dict(type='InferenceFormHook', val=True, test=True)
    cfg = build_test_cfg(cfg_path, 'ckpt.pth', inference_form=True,
                         cfg_options={'custom_hooks': [own]})
    assert [h for h in cfg.custom_hooks
            if h['type'] == 'InferenceFormHook'] == [own]


@pytest.mark.parametrize('tool,flags', [
    ('train.py', ['--work-dir', '--resume', '--amp', '--auto-scale-lr',
                  '--seed', '--deterministic', '--cfg-options', '--launcher',
                  '--nonfinite-loss', '--debug']),
    ('test.py', ['--work-dir', '--cfg-options', '--launcher', '--out',
                 '--dump', '--non-strict', '--debug']),
])
@pytest.mark.slow
def test_help_lists_options(tool, flags):
    out = subprocess.run([sys.executable, str(ROOT / 'tools' / tool), '-h'],
                         capture_output=True, text=True, check=True).stdout
    for flag in flags:
        assert flag in out


@pytest.mark.slow
def test_test_py_writes_metrics_json_and_predictions(tmp_path, monkeypatch):
    import json

    import mmcv
    import mmengine
    import numpy as np
    from cluster_helpers import write_tiny_seg_checkpoint

    cfg_path, ckpt = write_tiny_seg_checkpoint(tmp_path, monkeypatch, n=3)

    tool = load_tool('test')
    out, dump = tmp_path / 'res' / 'metrics.json', tmp_path / 'preds.pkl'
    metrics = tool.main([str(cfg_path), str(ckpt), '--work-dir',
                         str(tmp_path / 'w'), '--out', str(out), '--dump',
                         str(dump)])
    record = json.loads(out.read_text())
    assert record['checkpoint'] == str(ckpt)
    assert record['config'] == str(cfg_path)
    assert set(record['metrics']) == {'aAcc', 'mIoU', 'mAcc'}
    assert record['metrics'] == pytest.approx(
        {k: float(v) for k, v in metrics.items()})

    preds = mmengine.load(str(dump))
    assert len(preds) == 3
    # mIoU recomputed from the dumped predictions and the label files.
    inter, union = np.zeros(28), np.zeros(28)
    for p in preds:
        pred = p['pred_sem_seg']['data'][0].numpy()
        gt = mmcv.imread(p['seg_map_path'], flag='unchanged')
        assert pred.shape == gt.shape == (64, 48)
        for c in range(28):
            inter[c] += ((pred == c) & (gt == c)).sum()
            union[c] += ((pred == c) | (gt == c)).sum()
    with np.errstate(invalid='ignore'):
        miou = np.nanmean(inter / union) * 100
    assert record['metrics']['mIoU'] == pytest.approx(miou, abs=0.01)

    # Without --out: <work_dir>/<timestamp>/metrics.json.
    tool.main([str(cfg_path), str(ckpt), '--work-dir', str(tmp_path / 'w2')])
    found = list((tmp_path / 'w2').glob('*/metrics.json'))
    assert len(found) == 1
    with pytest.raises(ValueError, match='.pkl'):
        tool.main([str(cfg_path), str(ckpt), '--dump', 'preds.json'])
