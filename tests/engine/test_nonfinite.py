"""A NaN / inf loss stops the run with a clear message, or skips the step
without touching the weights, as configured; in distributed training all
ranks agree."""
import json
import math
import re
import subprocess
import sys
import uuid

import numpy as np
import pytest
import torch
from cluster_helpers import ROOT, ToyData, ToyModel, free_port, run_env
from mmengine.hooks import Hook
from mmengine.runner import Runner

from sapiens_mm.engine.runner_cfg import build_train_cfg
from sapiens_mm.engine import NonFiniteLossHook


class Snapshots(Hook):
    """Weights after every iteration."""
    priority = 'LOWEST'

    def __init__(self):
        self.after = {}

    def after_train_iter(self, runner, batch_idx, data_batch=None,
                         outputs=None):
        self.after[runner.iter + 1] = runner.model.fc.weight.detach().clone()


def _runner(tmp_path, data, hooks, max_iters=6):
    return Runner(
        model=ToyModel(),
        work_dir=str(tmp_path),
        train_dataloader=dict(
            dataset=data, batch_size=1, num_workers=0,
            sampler=dict(type='DefaultSampler', shuffle=False),
            collate_fn=dict(type='default_collate')),
        optim_wrapper=dict(optimizer=dict(type='AdamW', lr=0.05)),
        train_cfg=dict(by_epoch=False, max_iters=max_iters),
        custom_hooks=hooks,
        default_hooks=dict(checkpoint=None, logger=dict(
            type='LoggerHook', interval=1)),
        experiment_name=f'nonfinite_{uuid.uuid4().hex}')


def test_without_the_hook_a_nan_corrupts_every_weight(tmp_path):
    snaps = Snapshots()
    _runner(tmp_path, ToyData(bad=[2]), [snaps]).train()
    assert torch.isnan(snaps.after[6]).all()


def test_stop_names_iteration_and_terms_and_keeps_weights(tmp_path):
    snaps = Snapshots()
    runner = _runner(tmp_path, ToyData(bad=[2]),
                     [NonFiniteLossHook(action='stop'), snaps])
    with pytest.raises(FloatingPointError) as err:
        runner.train()
    msg = str(err.value)
    assert 'iteration 3 (epoch 1)' in msg
    assert 'loss_mse=nan' in msg and 'loss=nan' in msg
    assert "action='skip'" in msg  # says what to do
    # No backward / step happened with the NaN: weights of iteration 2.
    assert sorted(snaps.after) == [1, 2]
    assert torch.equal(runner.model.fc.weight, snaps.after[2])
    state = runner.optim_wrapper.optimizer.state[runner.model.fc.weight]
    assert int(state['step']) == 2


@pytest.mark.parametrize('value', [float('nan'), float('inf')])
def test_skip_leaves_weights_and_optimizer_untouched(tmp_path, value):
    snaps = Snapshots()
    hook = NonFiniteLossHook(action='skip')
    runner = _runner(tmp_path, ToyData(bad=[2], value=value), [hook, snaps])
    runner.train()
    assert sorted(snaps.after) == [1, 2, 3, 4, 5, 6]
    assert torch.equal(snaps.after[3], snaps.after[2])  # skipped
    assert not torch.equal(snaps.after[4], snaps.after[3])  # went on
    assert torch.isfinite(snaps.after[6]).all()
    state = runner.optim_wrapper.optimizer.state[runner.model.fc.weight]
    assert int(state['step']) == 5
    assert hook.num_skipped == 1
    # The smoothed logged loss is not poisoned by the skipped value.
    history = runner.message_hub.get_scalar('train/loss').data[0]
    assert len(history) == 5 and all(map(math.isfinite, history))
    # The hook removed its wrappers at the end of training.
    assert 'update_params' not in vars(runner.optim_wrapper)


def test_skip_stops_after_too_many_in_a_row(tmp_path):
    runner = _runner(
        tmp_path, ToyData(bad=range(2, 12)),
        [NonFiniteLossHook(action='skip', max_consecutive_skips=3)],
        max_iters=12)
    with pytest.raises(FloatingPointError, match=r'iteration 6 .*4th '
                       r'non-finite loss in a row'):
        runner.train()


def test_empty_loss_warns_each_iteration_and_stops(tmp_path):
    """Targets with no valid element (all NaN / ignored: the masked loss is
    exactly 0 with zero gradients): each such iteration is a warning, and
    max_consecutive_empty in a row stop the run. Before, training logged
    loss 0.0000 every iteration and exited 0."""
    hook = NonFiniteLossHook(action='stop', max_consecutive_empty=3)
    snaps = Snapshots()
    # samples 1, 2, 3, ... learn nothing (loss * 0); sample 0 is fine
    runner = _runner(tmp_path, ToyData(bad=range(1, 12), value=0.0),
                     [hook, snaps], max_iters=8)
    with pytest.raises(FloatingPointError,
                       match=r'exactly 0 at iteration 4 .*'
                       r'max_consecutive_empty=3'):
        runner.train()
    assert hook.num_empty == 3
    log = next(tmp_path.glob('*/*.log')).read_text()
    warned = re.findall(r'WARNING - Training loss is exactly 0 at '
                        r'iteration (\d+)', log)
    assert warned == ['2', '3']  # then the third one stops the run
    assert sorted(snaps.after) == [1, 2, 3]


def test_isolated_empty_batches_only_warn(tmp_path):
    hook = NonFiniteLossHook(action='stop', max_consecutive_empty=2)
    runner = _runner(tmp_path, ToyData(bad=[1, 3], value=0.0), [hook],
                     max_iters=6)
    runner.train()  # never two in a row: the run completes
    assert hook.num_empty == 2 and runner.iter == 6


def test_empty_batches_are_skipped_with_skip(tmp_path):
    snaps = Snapshots()
    hook = NonFiniteLossHook(action='skip')
    runner = _runner(tmp_path, ToyData(bad=[2], value=0.0), [hook, snaps])
    runner.train()
    # AdamW would still move the weights (momentum, decay) on a zero loss
    assert torch.equal(snaps.after[3], snaps.after[2])
    assert hook.num_empty == 1 and hook.num_skipped == 1


def test_all_ignored_seg_targets_stop_a_real_run(tmp_path):
    """The tiny seg model on masks that are all ignore_index (255): mmseg's
    cross-entropy is exactly 0; tools/train.py's hook stops the run."""
    import cv2
    from cluster_helpers import write_seg_data, write_tiny_config
    from mmengine.registry import init_default_scope
    data = write_seg_data(tmp_path / 'data', n=4)
    for mask in (data / 'train' / 'masks').iterdir():
        cv2.imwrite(str(mask), np.full((64, 48), 255, np.uint8))
    cfg_path = write_tiny_config(
        tmp_path, data, batch_size=2, max_epochs=3, augment=False,
        dropout=0.0, extra="custom_hooks = [dict(type='NonFiniteLossHook', "
        "max_consecutive_empty=3)]\n")
    import sys
    sys.path.insert(0, str(tmp_path))
    try:
        cfg = build_train_cfg(str(cfg_path), work_dir=str(tmp_path / 'w'))
        init_default_scope('mmseg')
        with pytest.raises(FloatingPointError, match='exactly 0 at '
                           'iteration 3'):
            Runner.from_cfg(cfg).train()
    finally:
        sys.path.remove(str(tmp_path))


def test_bad_arguments():
    with pytest.raises(ValueError, match="'stop' or 'skip'"):
        NonFiniteLossHook(action='ignore')
    with pytest.raises(ValueError, match='max_consecutive_skips'):
        NonFiniteLossHook(max_consecutive_skips=0)
    with pytest.raises(ValueError, match='max_consecutive_empty'):
        NonFiniteLossHook(max_consecutive_empty=0)


def test_train_cfg_adds_the_hook(tmp_path):
    p = tmp_path / 'c.py'
    p.write_text("optim_wrapper = dict(optimizer=dict(type='SGD', lr=1))\n")
    cfg = build_train_cfg(str(p))
    assert dict(type='NonFiniteLossHook', action='stop') in cfg.custom_hooks
    cfg = build_train_cfg(str(p), nonfinite_loss='skip')
    assert dict(type='NonFiniteLossHook', action='skip') in cfg.custom_hooks
    # A config's own hook is kept; the flag overrides its action.
    p.write_text(p.read_text() + "custom_hooks = [dict(type="
                 "'NonFiniteLossHook', action='skip', "
                 "max_consecutive_skips=3)]\n")
    cfg = build_train_cfg(str(p))
    hooks = [h for h in cfg.custom_hooks if h.type == 'NonFiniteLossHook']
    assert hooks == [dict(type='NonFiniteLossHook', action='skip',
                          max_consecutive_skips=3)]
    cfg = build_train_cfg(str(p), nonfinite_loss='stop')
    assert [h.action for h in cfg.custom_hooks
            if h.type == 'NonFiniteLossHook'] == ['stop']


DIST_SCRIPT = '''
import json, os, sys
from cluster_helpers import ToyData, ToyModel
import torch.distributed as dist
from mmengine.runner import Runner
from sapiens_mm.engine import NonFiniteLossHook

dist.init_process_group('gloo')
rank = dist.get_rank()
out = {}
for action in ('skip', 'stop'):
    # Sample 3 is on rank 1 at iteration 2 (no shuffle, batch 1).
    runner = Runner(
        model=ToyModel(), work_dir=sys.argv[1] + '/' + action,
        train_dataloader=dict(
            dataset=ToyData(bad=[3]), batch_size=1, num_workers=0,
            sampler=dict(type='DefaultSampler', shuffle=False),
            collate_fn=dict(type='default_collate')),
        optim_wrapper=dict(optimizer=dict(type='AdamW', lr=0.05)),
        train_cfg=dict(by_epoch=False, max_iters=4),
        custom_hooks=[NonFiniteLossHook(action=action)],
        default_hooks=dict(checkpoint=None),
        launcher='pytorch', env_cfg=dict(dist_cfg=dict(backend='gloo')),
        cfg=dict(model_wrapper_cfg=dict(type='MMDistributedDataParallel',
                                        device_ids=None)),
        experiment_name='dist_' + action)
    try:
        runner.train()
        error = None
    except FloatingPointError as e:
        error = str(e)
    weight = runner.model.module.fc.weight.detach()
    state = runner.optim_wrapper.optimizer.state.get(
        runner.model.module.fc.weight, {})
    out[action] = dict(error=error, iter=runner.iter,
                       steps=int(state.get('step', 0)),
                       weight=weight.flatten().tolist())
with open(f'{sys.argv[1]}/rank{rank}.json', 'w') as f:
    json.dump(out, f)
dist.destroy_process_group()
'''


@pytest.mark.slow
def test_all_ranks_skip_or_stop_together(tmp_path):
    """Only rank 1 sees the NaN; both ranks skip (no gradient all-reduce
    hang, identical weights) or both stop with the message."""
    script = tmp_path / 'dist_nonfinite.py'
    script.write_text(DIST_SCRIPT)
    proc = subprocess.run(
        [sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node',
         '2', '--master_addr', '127.0.0.1', '--master_port',
         str(free_port()), str(script), str(tmp_path)],
        capture_output=True, text=True, timeout=240, cwd=str(ROOT),
        env=dict(run_env(tmp_path), PYTHONPATH=str(ROOT / 'tests' / 'helpers') + ':' +
                 run_env(tmp_path)['PYTHONPATH']))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    r0, r1 = (json.loads((tmp_path / f'rank{r}.json').read_text())
              for r in (0, 1))
    # skip: both ranks trained 4 iterations, 3 optimizer steps, same weights
    for r in (r0, r1):
        assert r['skip']['error'] is None and r['skip']['iter'] == 4
        assert r['skip']['steps'] == 3
    assert r0['skip']['weight'] == r1['skip']['weight']
    assert all(map(math.isfinite, r0['skip']['weight']))
    # stop: both ranks raised at iteration 2, after one step
    for r in (r0, r1):
        assert 'iteration 2 (epoch 1) on rank 1' in r['stop']['error']
        assert r['stop']['steps'] == 1
    assert 'loss_mse=nan' in r1['stop']['error']
    assert r0['stop']['weight'] == r1['stop']['weight']
