"""Shared pieces of the distributed / resume / non-finite tests: tiny
generated data, a tiny leaf config on top of the shipped tiny segmentation
config, test-only hooks, and subprocess helpers."""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch
import torch.nn as nn
from mmengine.model import BaseModel
from torch.utils.data import Dataset

ROOT = Path(__file__).resolve().parents[2]
TINY_SEG = ROOT / 'configs' / 'seg' / 'goliath' / \
    'sapiens_tiny-200e_goliath-256x192.py'

# Imported by the training subprocesses through custom_imports.
TEST_HOOKS = '''
import json
import os
import time

from mmengine.dist import get_dist_info
from mmengine.hooks import Hook
from mmengine.registry import HOOKS


@HOOKS.register_module(force=True)
class LossRecorderHook(Hook):
    """Append every iteration's loss (full precision) to
    <work_dir>/losses_rank<r>.jsonl; block at TEST_BLOCK_AT_ITER."""
    priority = 'LOWEST'

    def after_train_iter(self, runner, batch_idx, data_batch=None,
                         outputs=None):
        rank = get_dist_info()[0]
        rec = dict(pid=os.getpid(), iter=runner.iter + 1,
                   epoch=runner.epoch + 1, loss=float(outputs['loss'].detach()))
        path = os.path.join(runner.work_dir, f'losses_rank{rank}.jsonl')
        with open(path, 'a') as f:
            f.write(json.dumps(rec) + '\\n')
        block = os.environ.get('TEST_BLOCK_AT_ITER')
        if block and runner.iter + 1 == int(block):
            open(os.path.join(runner.work_dir, 'blocked'), 'w').close()
            time.sleep(600)  # the test SIGKILLs us here
'''

LEAF = '''
_base_ = {bases!r}
custom_imports = dict(
    imports=['sapiens_mm', 'cluster_test_hooks'], allow_failed_imports=False)
image_size = (64, 48)
data_root = {data_root!r}
model = dict(
    data_preprocessor=dict(size=image_size),
    backbone=dict(img_size=image_size),
    decode_head=dict(dropout_ratio={dropout}))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
{augment}    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(
    batch_size={batch_size},
    num_workers=0,
    persistent_workers=False,
    dataset=dict(data_root=data_root, pipeline=train_pipeline))
val_dataloader = None
val_evaluator = None
val_cfg = None
test_dataloader = dict(
    batch_size=1,
    num_workers=0,
    persistent_workers=False,
    dataset=dict(data_root=data_root, pipeline=test_pipeline))
train_cfg = dict(type='EpochBasedTrainLoop', max_epochs={max_epochs},
                 val_interval=1000)
optim_wrapper = dict(optimizer=dict(lr=2e-3))
param_scheduler = []
default_hooks = dict(
    logger=dict(interval=1),
    checkpoint=dict(interval=1, max_keep_ckpts=-1, save_best=None))
custom_hooks = [dict(type='LossRecorderHook')]
env_cfg = dict(cudnn_benchmark=False)
'''

AUGMENT = '''    dict(type='BodyPartRandomFlip', prob=0.5, vocab='goliath_28'),
    dict(type='PhotoMetricDistortion'),
'''


def write_seg_data(root: Path, n: int = 8, size=(64, 48), seed: int = 0):
    """``n`` images + goliath-28 masks in ``<root>/{train,val}/images|masks``
    (the synthetic generator's layout): coloured blobs on noise."""
    import mmcv
    rng = np.random.default_rng(seed)
    h, w = size
    for split in ('train', 'val'):
        for i in range(n):
            img = rng.integers(0, 60, (h, w, 3)).astype(np.uint8)
            mask = np.zeros((h, w), np.uint8)
            for label in rng.choice(np.arange(1, 28), 3, replace=False):
                r, c = rng.integers(0, h - 16), rng.integers(0, w - 12)
                mask[r:r + 16, c:c + 12] = label
                img[r:r + 16, c:c + 12] = (9 * label, 255 - 7 * label, 120)
            mmcv.imwrite(img, str(root / split / 'images' / f'{i:02d}.png'))
            mmcv.imwrite(mask, str(root / split / 'masks' / f'{i:02d}.png'))
    return root


def write_tiny_config(folder: Path, data_root: Path, *, batch_size: int,
                      max_epochs: int, augment: bool, dropout: float,
                      name: str = 'tiny_seg.py',
                      extra: str = '',
                      extra_bases: Sequence[Path] = ()) -> Path:
    """A leaf config on top of the shipped tiny segmentation config, plus
    the test hooks module next to it."""
    (folder / 'cluster_test_hooks.py').write_text(TEST_HOOKS)
    path = folder / name
    path.write_text(
        LEAF.format(bases=[str(TINY_SEG)] + [str(b) for b in extra_bases],
                    data_root=str(data_root),
                    dropout=dropout, augment=AUGMENT if augment else '',
                    batch_size=batch_size, max_epochs=max_epochs) + extra)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def run_env(folder: Path) -> Dict[str, str]:
    """Environment of a training subprocess: test hooks importable, one
    thread (CI has 2 cores)."""
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(
        [str(folder), str(ROOT)] +
        ([env['PYTHONPATH']] if env.get('PYTHONPATH') else []))
    env['OMP_NUM_THREADS'] = '1'
    env['MKL_NUM_THREADS'] = '1'
    env.pop('TEST_BLOCK_AT_ITER', None)
    return env


def train_cmd(config: Path, work_dir: Path, *extra: str) -> List[str]:
    return [sys.executable, str(ROOT / 'tools' / 'train.py'), str(config),
            '--work-dir', str(work_dir), '--seed', '0', '--deterministic',
            *extra]


def start(cmd: List[str], env: Dict[str, str], log: Path) -> subprocess.Popen:
    f = open(log, 'w')
    return subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT,
                            cwd=str(ROOT), start_new_session=True)


def finish(proc: subprocess.Popen, log: Path, timeout: float = 240) -> None:
    """Wait for ``proc``; fail with the end of its log if it fails."""
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        raise AssertionError(f'timed out; log:\n{tail(log)}')
    assert rc == 0, f'exit {rc}; log:\n{tail(log)}'


def tail(log: Path, n: int = 4000) -> str:
    return log.read_text(errors='replace')[-n:]


def read_losses(work_dir: Path, rank: int = 0,
                pid: Optional[int] = None) -> Dict[int, float]:
    """``{iteration: loss}`` recorded by LossRecorderHook (one process)."""
    out = {}
    path = work_dir / f'losses_rank{rank}.jsonl'
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if pid is None or rec['pid'] == pid:
            out[rec['iter']] = rec['loss']
    return out


def logged_scalars(work_dir: Path, run: int = -1) -> Dict[int, dict]:
    """mmengine's JSON log (``<work_dir>/<timestamp>/vis_data/scalars.json``)
    of the ``run``-th run in that work dir: ``{step: record}``."""
    runs = sorted(p for p in work_dir.iterdir()
                  if (p / 'vis_data' / 'scalars.json').is_file())
    lines = (runs[run] / 'vis_data' / 'scalars.json').read_text().splitlines()
    return {rec['step']: rec for rec in map(json.loads, lines)
            if 'loss' in rec}


class ToyData(Dataset):
    """Sample i is ``(x_i, y_i)``; samples in ``bad`` make the loss
    ``value`` (NaN by default)."""

    def __init__(self, n=12, bad=(), value=float('nan')):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 4, generator=g)
        self.y = torch.randn(n, 1, generator=g)
        self.bad, self.value = set(bad), value

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return dict(x=self.x[i], y=self.y[i],
                    scale=torch.tensor(self.value if i in self.bad else 1.0))


class ToyModel(BaseModel):
    """One linear layer with an MSE loss (``loss_mse``) and a zero
    ``loss_reg`` term."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 1)

    def forward(self, x, y, scale, mode='loss'):
        err = (self.fc(x) - y).pow(2).mean()
        return dict(loss_mse=err * scale.mean(), loss_reg=err.detach() * 0)


def simulate_full_disk(monkeypatch) -> None:
    """Make every ``os.fdopen`` file (what ``atomic_write`` writes through)
    write part of its data and then fail with ENOSPC, as a full disk
    does."""
    import errno
    real_fdopen = os.fdopen

    class FullDisk:

        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()
            return False

        def write(self, data):
            self.f.write(data[:len(data) // 3])
            raise OSError(errno.ENOSPC, 'No space left on device')

        def __getattr__(self, name):
            return getattr(self.f, name)

    monkeypatch.setattr(os, 'fdopen',
                        lambda *a, **k: FullDisk(real_fdopen(*a, **k)))


def write_tiny_seg_checkpoint(tmp_path: Path, monkeypatch, n: int) -> tuple:
    """A tiny seg config over ``n`` written images (its folder on
    ``sys.path`` for its custom_imports) and a checkpoint of its model.

    Returns:
        ``(config path, checkpoint path)``.
    """
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmseg.registry import MODELS
    data = write_seg_data(tmp_path / 'data', n=n)
    cfg_path = write_tiny_config(tmp_path, data, batch_size=1, max_epochs=1,
                                 augment=False, dropout=0.0)
    monkeypatch.syspath_prepend(str(tmp_path))
    init_default_scope('mmseg')
    model = MODELS.build(Config.fromfile(str(cfg_path)).model)
    ckpt = tmp_path / 'model.pth'
    torch.save({'state_dict': model.state_dict()}, str(ckpt))
    return cfg_path, ckpt


def torchrun_node_cmd(script: Path, *args: str, nnodes: int, node_rank: int,
                      nproc: int, port: int) -> List[str]:
    """``torchrun`` for node ``node_rank`` of a job of ``nnodes`` simulated
    nodes on this machine (static rendezvous at ``127.0.0.1:port``, each
    node started by its own call, as on a cluster)."""
    return [sys.executable, '-m', 'torch.distributed.run',
            f'--nnodes={nnodes}', f'--node-rank={node_rank}',
            f'--nproc-per-node={nproc}', '--master-addr=127.0.0.1',
            f'--master-port={port}', str(script), *args]


