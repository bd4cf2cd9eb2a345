"""Distributed training on CPU (gloo): DDP parity with one process, the
launch scripts, and the FSDP (FlexibleRunner) recipe."""
import os
import re
import stat
import subprocess
import sys

import pytest
import torch
from cluster_helpers import (ROOT, finish, free_port, read_losses, run_env,
                             start, train_cmd, write_seg_data,
                             write_tiny_config)
from mmengine.config import Config

from sapiens_mm.engine.runner_cfg import build_runner, build_train_cfg
from sapiens_mm.checkpoint import load_file

# Per-iteration loss of 2 processes x batch 2 (mean over ranks) vs 1 process
# x batch 4: same samples, same seed; only the order of float additions
# differs (gradient all-reduce), so the losses agree to float32 rounding.
LOSS_RTOL = 1e-5  # observed: <= 2e-7
WEIGHT_ATOL = 1e-4


def _compared_weights(state):
    """All weights but the biases of the head convs that feed an
    InstanceNorm: their exact gradient is zero (the norm removes any
    constant), so they only follow float rounding noise, which AdamW
    scales up to lr-sized steps in either process."""
    return {k: v for k, v in state.items()
            if not re.fullmatch(r'decode_head\.conv_layers\.\d+\.bias', k)}


@pytest.mark.slow
def test_ddp_two_processes_match_one_process(tmp_path):
    data = write_seg_data(tmp_path / 'data', n=8)
    # No random augmentation or dropout: those draw per process by design.
    cfg = write_tiny_config(tmp_path, data, batch_size=2, max_epochs=3,
                            augment=False, dropout=0.0)
    env = run_env(tmp_path)
    single_dir, ddp_dir = tmp_path / 'single', tmp_path / 'ddp'
    single = start(
        train_cmd(cfg, single_dir, '--cfg-options',
                  'train_dataloader.batch_size=4'), env,
        tmp_path / 'single.log')
    ddp = start(['bash', str(ROOT / 'tools' / 'dist_train.sh'), str(cfg), '2',
                 '--work-dir', str(ddp_dir), '--seed', '0', '--deterministic'],
                dict(env, PYTHON=sys.executable, PORT=str(free_port()),
                     MASTER_ADDR='127.0.0.1'), tmp_path / 'ddp.log')
    finish(single, tmp_path / 'single.log')
    finish(ddp, tmp_path / 'ddp.log')
    assert 'Distributed launcher: pytorch' in (tmp_path / 'ddp.log').read_text()

    one = read_losses(single_dir)
    rank0, rank1 = read_losses(ddp_dir, 0), read_losses(ddp_dir, 1)
    assert sorted(one) == sorted(rank0) == sorted(rank1) == list(range(1, 7))
    two = {i: (rank0[i] + rank1[i]) / 2 for i in one}
    for i in one:
        assert two[i] == pytest.approx(one[i], rel=LOSS_RTOL), (i, one, two)
    assert rank0 != rank1  # each rank saw different samples
    assert max(one.values()) - min(one.values()) > 100 * LOSS_RTOL
    a = load_file(str(single_dir / 'epoch_3.pth'))['state_dict']
    b = load_file(str(ddp_dir / 'epoch_3.pth'))['state_dict']
    assert a.keys() == b.keys()
    a, b = _compared_weights(a), _compared_weights(b)
    assert len(a) > 30
    for k in a:
        torch.testing.assert_close(b[k], a[k], atol=WEIGHT_ATOL, rtol=0,
                                   msg=k)


@pytest.mark.skipif(torch.cuda.is_available(), reason='CPU-only adaptation')
def test_cpu_distributed_config(tmp_path):
    p = tmp_path / 'c.py'
    p.write_text("env_cfg = dict(dist_cfg=dict(backend='nccl'))\n"
                 "optim_wrapper = dict(optimizer=dict(type='SGD', lr=1))\n")
    cfg = build_train_cfg(str(p), launcher='pytorch')
    assert cfg.env_cfg.dist_cfg.backend == 'gloo'
    assert cfg.model_wrapper_cfg.device_ids is None
    assert cfg.model_wrapper_cfg.type == 'MMDistributedDataParallel'
    cfg = build_train_cfg(str(p))  # no launcher: untouched
    assert cfg.env_cfg.dist_cfg.backend == 'nccl'
    assert 'model_wrapper_cfg' not in cfg
    # Training hooks added to every run.
    assert [h.type for h in cfg.custom_hooks] == [
        'ReseedHook', 'BestCheckpointGuardHook', 'ConfigDataHook',
        'NonFiniteLossHook']


@pytest.mark.parametrize('name', [
    'sapiens_0.3b-200e_goliath-1024x768-seg_fsdp_bf16.py',
    'sapiens_1b-200e_goliath-1024x768-seg_fsdp_bf16.py',
    'sapiens_2b-200e_goliath-1024x768-seg_fsdp_bf16.py',
    'sapiens_1b-210e_goliath-1024x768-pose_fsdp_bf16.py',
    'sapiens_2b-210e_goliath-1024x768-pose_fsdp_bf16.py',
])
@pytest.mark.slow
def test_fsdp_configs_build_a_flexible_runner(tmp_path, name):
    """tools/train.py builds mmengine's FlexibleRunner (RUNNERS.build) for
    the shipped FSDP configs."""
    path = ROOT / 'configs' / 'fsdp' / name
    shipped = Config.fromfile(str(path))
    assert shipped.runner_type == 'FlexibleRunner'
    assert shipped.strategy.type == 'FSDPStrategy'
    assert shipped.strategy.state_dict_cfg == 'full'
    assert shipped.model.backbone.with_cp is True
    assert shipped.model.backbone.arch == name.split('-')[0]
    assert shipped.optim_wrapper.type == 'FSDPAmpOptimWrapper'
    assert shipped.optim_wrapper.dtype == 'bfloat16'
    # Everything else is the task config's.
    assert shipped.optim_wrapper.clip_grad == dict(max_norm=1.0, norm_type=2)
    cfg = build_train_cfg(str(path), work_dir=str(tmp_path / 'w'))
    runner = build_runner(cfg)  # model and strategy are built lazily
    from mmengine._strategy import FSDPStrategy
    from mmengine.runner import FlexibleRunner
    assert isinstance(runner, FlexibleRunner)
    assert isinstance(runner.strategy, FSDPStrategy)


# SGD (unlike Adam, whose steps ignore a constant gradient scale) with a
# max_norm that clips every step: a shard-local norm would change the steps.
SGD_CLIPPED = '''
optim_wrapper = dict(
    optimizer=dict(_delete_=True, type='SGD', lr=0.2, momentum=0.9),
    clip_grad=dict(max_norm=0.05))
'''


@pytest.mark.slow
def test_fsdp_trains_on_cpu_and_matches_one_process(tmp_path):
    """The shipped FSDP strategy (configs/_base_/fsdp_bf16.py: one unit per
    encoder layer, full-state-dict checkpoints) with FSDPOptimWrapper
    (global-norm clipping) on 2 CPU processes gives the losses and weights
    of the plain single-process run."""
    data = write_seg_data(tmp_path / 'data', n=8)
    cfg_fsdp = write_tiny_config(
        tmp_path, data, batch_size=2, max_epochs=2, augment=False,
        dropout=0.0, name='fsdp.py', extra=SGD_CLIPPED,
        extra_bases=[ROOT / 'configs' / '_base_' / 'fsdp_bf16.py'])
    cfg_one = write_tiny_config(
        tmp_path, data, batch_size=4, max_epochs=2, augment=False,
        dropout=0.0, name='one.py',
        extra=SGD_CLIPPED)
    env = run_env(tmp_path)
    one = start(train_cmd(cfg_one, tmp_path / 'one'), env,
                tmp_path / 'one.log')
    fsdp = start([sys.executable, '-m', 'torch.distributed.run',
                  '--nproc_per_node', '2', '--master_addr', '127.0.0.1',
                  '--master_port', str(free_port()),
                  str(ROOT / 'tools' / 'train.py'), str(cfg_fsdp),
                  '--launcher', 'pytorch', '--work-dir',
                  str(tmp_path / 'fsdp'), '--seed', '0', '--deterministic'],
                 env, tmp_path / 'fsdp.log')
    finish(one, tmp_path / 'one.log')
    finish(fsdp, tmp_path / 'fsdp.log')
    log = (tmp_path / 'fsdp.log').read_text()
    assert 'FSDPOptimWrapper' in log
    ref = read_losses(tmp_path / 'one')
    r0, r1 = (read_losses(tmp_path / 'fsdp', r) for r in (0, 1))
    assert sorted(ref) == sorted(r0) == [1, 2, 3, 4]
    for i in ref:
        # Clipping each shard by its own norm (mmengine's OptimWrapper
        # under FSDP) is off by > 1.5e-4 here.
        assert (r0[i] + r1[i]) / 2 == pytest.approx(ref[i], rel=LOSS_RTOL)
    a = load_file(str(tmp_path / 'one' / 'epoch_2.pth'))['state_dict']
    b = load_file(str(tmp_path / 'fsdp' / 'epoch_2.pth'))['state_dict']
    assert a.keys() == b.keys()  # full, unsharded state dict
    a, b = _compared_weights(a), _compared_weights(b)
    for k in a:
        torch.testing.assert_close(b[k], a[k], atol=WEIGHT_ATOL, rtol=0,
                                   msg=k)


SCRIPTS = ['dist_train.sh', 'dist_test.sh', 'slurm_train.sh', 'slurm_test.sh']


@pytest.mark.parametrize('script', SCRIPTS)
def test_launch_scripts_parse(script):
    path = ROOT / 'tools' / script
    subprocess.run(['bash', '-n', str(path)], check=True)
    assert path.stat().st_mode & stat.S_IXUSR
    out = subprocess.run(['bash', str(path)], capture_output=True, text=True)
    assert out.returncode == 2 and 'usage' in out.stderr


def _fake_bin(tmp_path):
    """A PATH folder whose srun / python only print their arguments."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    for name in ('srun', 'fakepython'):
        f = bin_dir / name
        f.write_text('#!/usr/bin/env bash\necho "' + name +
                     ' $*"\necho "PYTHONPATH=$PYTHONPATH"\n')
        f.chmod(0o755)
    return bin_dir


def test_slurm_train_command_line(tmp_path):
    bin_dir = _fake_bin(tmp_path)
    env = dict(os.environ, PATH=f'{bin_dir}:{os.environ["PATH"]}', GPUS='16',
               GPUS_PER_NODE='8', CPUS_PER_TASK='6',
               SRUN_ARGS='--time=72:00:00 --qos=high', PYTHON='fakepython')
    out = subprocess.run(
        ['bash', str(ROOT / 'tools' / 'slurm_train.sh'), 'gpu', 'seg1b',
         'configs/x.py', 'work_dirs/x', '--amp', '--resume'],
        capture_output=True, text=True, env=env, check=True).stdout
    srun = out.splitlines()[0].split()
    assert srun[:3] == ['srun', '-p', 'gpu']
    for arg in ['--job-name=seg1b', '--gres=gpu:8', '--ntasks=16',
                '--ntasks-per-node=8', '--cpus-per-task=6',
                '--kill-on-bad-exit=1', '--time=72:00:00', '--qos=high']:
        assert arg in srun
    cmd = srun[srun.index('fakepython'):]
    assert cmd == ['fakepython', '-u', str(ROOT / 'tools' / 'train.py'),
                   'configs/x.py', '--work-dir=work_dirs/x',
                   '--launcher=slurm', '--amp', '--resume']
    assert out.splitlines()[1].startswith(f'PYTHONPATH={ROOT}/tools/..')


def test_slurm_test_and_dist_test_command_lines(tmp_path):
    bin_dir = _fake_bin(tmp_path)
    env = dict(os.environ, PATH=f'{bin_dir}:{os.environ["PATH"]}',
               PYTHON='fakepython', NNODES='2', NODE_RANK='1',
               MASTER_ADDR='10.0.0.1', PORT='29999')
    out = subprocess.run(
        ['bash', str(ROOT / 'tools' / 'slurm_test.sh'), 'gpu', 'ev',
         'c.py', 'm.pth', '--out', 'r.json'],
        capture_output=True, text=True, env=env, check=True).stdout
    srun = out.splitlines()[0].split()
    assert '--ntasks=8' in srun  # GPUS defaults to 8
    assert srun[srun.index('fakepython'):] == [
        'fakepython', '-u', str(ROOT / 'tools' / 'test.py'), 'c.py', 'm.pth',
        '--launcher=slurm', '--out', 'r.json']
    out = subprocess.run(
        ['bash', str(ROOT / 'tools' / 'dist_test.sh'), 'c.py', 'm.pth', '4',
         '--dump', 'p.pkl'],
        capture_output=True, text=True, env=env, check=True).stdout
    assert out.splitlines()[0].split() == [
        'fakepython', '-m', 'torch.distributed.run', '--nnodes=2',
        '--node_rank=1', '--master_addr=10.0.0.1', '--master_port=29999',
        '--nproc_per_node=4', str(ROOT / 'tools' / 'test.py'), 'c.py',
        'm.pth', '--launcher', 'pytorch', '--dump', 'p.pkl']
