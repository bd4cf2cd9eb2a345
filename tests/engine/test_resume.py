"""Resume after failure: SIGKILL mid-epoch, restart with --resume auto, get
the losses of a run that was never interrupted; checkpoints written
atomically; a broken latest checkpoint is never picked."""
import os
import signal
import time
import zipfile

import pytest
import torch
from cluster_helpers import (finish, logged_scalars, read_losses, run_env,
                             simulate_full_disk, start, tail, train_cmd,
                             write_seg_data, write_tiny_config)

from sapiens_mm.engine.runner_cfg import build_train_cfg
from sapiens_mm.checkpoint import load_file
from sapiens_mm.engine import (ATOMIC_BACKEND, AtomicLocalBackend,
                               atomic_path, atomic_write,
                               find_resumable_checkpoint,
                               is_complete_checkpoint,
                               remove_stale_temp_files)

ITERS_PER_EPOCH = 4  # 8 samples, batch 2


@pytest.fixture(autouse=True)
def _safe_loading():
    """Resuming in this process reads the Runner's checkpoints (message hub
    objects) through sapiens_mm's reader, as tools/train.py runs the
    Runner."""
    from sapiens_mm.zoo import safe_checkpoint_loading
    with safe_checkpoint_loading():
        yield

KILL_AT = 7  # iteration 3 of epoch 2: after epoch_1.pth, mid-epoch


def _kill_and_resume(tmp_path, cfg, kill_at, kept, absent):
    """Train an uninterrupted reference run and, alongside, a run that is
    SIGKILLed in iteration ``kill_at`` (when checkpoint ``kept`` exists and
    ``absent`` does not yet), then ``--resume auto`` it.

    Returns:
        ``(ref_dir, work_dir, resumed process, resumed log text)``.
    """
    env = run_env(tmp_path)
    ref_dir, work_dir = tmp_path / 'uninterrupted', tmp_path / 'killed'
    ref = start(train_cmd(cfg, ref_dir), env, tmp_path / 'ref.log')
    killed = start(train_cmd(cfg, work_dir),
                   dict(env, TEST_BLOCK_AT_ITER=str(kill_at)),
                   tmp_path / 'killed.log')
    deadline = time.time() + 240
    while not (work_dir / 'blocked').exists():
        assert killed.poll() is None, tail(tmp_path / 'killed.log')
        assert time.time() < deadline, 'run never reached the kill point'
        time.sleep(0.2)
    assert (work_dir / kept).is_file()
    assert not (work_dir / absent).exists()
    os.killpg(killed.pid, signal.SIGKILL)
    assert killed.wait(timeout=30) == -signal.SIGKILL
    finish(ref, tmp_path / 'ref.log')
    resumed = start(train_cmd(cfg, work_dir, '--resume', 'auto'), env,
                    tmp_path / 'resumed.log')
    finish(resumed, tmp_path / 'resumed.log')
    return ref_dir, work_dir, resumed, (tmp_path / 'resumed.log').read_text()


@pytest.mark.slow
def test_sigkill_mid_epoch_then_resume_auto_matches_uninterrupted(tmp_path):
    data = write_seg_data(tmp_path / 'data', n=8)
    # Random flips / photometric distortion and head dropout: the resumed run
    # must draw the same random numbers as the uninterrupted one.
    cfg = write_tiny_config(tmp_path, data, batch_size=2, max_epochs=3,
                            augment=True, dropout=0.1)
    ref_dir, work_dir, resumed, log = _kill_and_resume(
        tmp_path, cfg, KILL_AT, 'epoch_1.pth', 'epoch_2.pth')
    assert 'resumed epoch: 1, iter: 4' in log

    expected = read_losses(ref_dir)
    assert sorted(expected) == list(range(1, 3 * ITERS_PER_EPOCH + 1))
    got = read_losses(work_dir, pid=resumed.pid)
    # Continues after the last checkpoint (end of epoch 1) ...
    assert sorted(got) == list(range(ITERS_PER_EPOCH + 1,
                                     3 * ITERS_PER_EPOCH + 1))
    # ... with exactly the losses of the run that was never interrupted.
    assert got == {i: expected[i] for i in got}
    # The losses moved (a frozen model would pass trivially).
    assert max(expected.values()) - min(expected.values()) > 1e-3
    # mmengine's own log (smoothed loss, lr) agrees too: its message hub
    # history was restored from the checkpoint.
    ref_log, res_log = logged_scalars(ref_dir), logged_scalars(work_dir)
    assert sorted(res_log) == sorted(got)
    for step, rec in res_log.items():
        assert rec['loss'] == ref_log[step]['loss']
        assert rec['lr'] == ref_log[step]['lr']
    # Same final weights.
    a = load_file(str(ref_dir / 'epoch_3.pth'))['state_dict']
    b = load_file(str(work_dir / 'epoch_3.pth'))['state_dict']
    assert all(torch.equal(a[k], b[k]) for k in a)


ITER_LOOP = """
train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters=12,
                 val_interval=1000)
default_hooks = dict(
    checkpoint=dict(by_epoch=False, interval=4, max_keep_ckpts=-1,
                    save_best=None))
log_processor = dict(by_epoch=False)
"""


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_auto_matches_uninterrupted_iter_loop(
        tmp_path):
    """The same for IterBasedTrainLoop (what the demo uses): killed after
    iter_4.pth, resumed, the losses of iterations 5-12 and the final
    weights equal those of a run never interrupted. The loop fetches a
    batch before the iteration's reseed, and after a resume it first
    re-fetches the trained batches: without the data reseed
    (ReseedHook's _ReseedingIterator) the augmentation differs from
    iteration 5 on."""
    data = write_seg_data(tmp_path / 'data', n=8)
    cfg = write_tiny_config(tmp_path, data, batch_size=2, max_epochs=1,
                            augment=True, dropout=0.1, extra=ITER_LOOP)
    ref_dir, work_dir, resumed, log = _kill_and_resume(
        tmp_path, cfg, 6, 'iter_4.pth', 'iter_8.pth')
    assert 'resumed epoch: 0, iter: 4' in log
    expected = read_losses(ref_dir)
    assert sorted(expected) == list(range(1, 13))
    got = read_losses(work_dir, pid=resumed.pid)
    assert sorted(got) == list(range(5, 13))
    assert got == {i: expected[i] for i in got}
    assert max(expected.values()) - min(expected.values()) > 1e-3
    a = load_file(str(ref_dir / 'iter_12.pth'))['state_dict']
    b = load_file(str(work_dir / 'iter_12.pth'))['state_dict']
    assert all(torch.equal(a[k], b[k]) for k in a)


def _save_and_crash(path: str, phase: str) -> None:
    """In a forked child: mmengine's save_checkpoint, killed by SIGKILL
    half-way through writing the bytes (``'write'``) or after the fsync,
    just before the rename (``'replace'``). Never returns."""
    from mmengine.fileio import get_file_backend
    from mmengine.runner.checkpoint import save_checkpoint

    # what the shipped configs' CheckpointHook (and tools/train.py) pass
    backend_args = dict(backend=ATOMIC_BACKEND)
    assert type(get_file_backend(
        path, backend_args=backend_args)) is AtomicLocalBackend
    checkpoint = {'state_dict': {'w': torch.full((256, 256), 2.0)},
                  'meta': {'epoch': 2}}
    if phase == 'write':
        real_fdopen = os.fdopen

        class HalfFile:

            def __init__(self, f):
                self.f = f

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

            def write(self, data):
                self.f.write(data[:len(data) // 2])
                self.f.flush()
                os.kill(os.getpid(), signal.SIGKILL)

            def __getattr__(self, name):
                return getattr(self.f, name)

        os.fdopen = lambda *a, **k: HalfFile(real_fdopen(*a, **k))
    else:
        os.replace = lambda *a: os.kill(os.getpid(), signal.SIGKILL)
    save_checkpoint(checkpoint, path, backend_args=backend_args)
    os._exit(3)  # not reached: the save must have been killed


@pytest.mark.parametrize('phase', ['write', 'replace'])
def test_kill_during_checkpoint_save_keeps_previous_file(tmp_path, phase):
    """SIGKILL while mmengine's save_checkpoint writes: the target keeps its
    previous complete content; --resume auto never sees a partial file."""
    target = tmp_path / 'work' / 'epoch_2.pth'
    target.parent.mkdir()
    torch.save({'state_dict': {'w': torch.ones(2)}, 'meta': {'epoch': 1}},
               str(target))  # an older complete checkpoint under that name
    (tmp_path / 'work' / 'last_checkpoint').write_text(str(target))
    pid = os.fork()
    if pid == 0:  # child
        try:
            _save_and_crash(str(target), phase)
        finally:
            os._exit(4)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status), status
    assert os.WTERMSIG(status) == signal.SIGKILL
    # The previous checkpoint is intact and loadable ...
    assert torch.equal(load_file(str(target))['state_dict']['w'],
                       torch.ones(2))
    # ... only a hidden temporary file is left, and it is incomplete.
    leftovers = [p for p in target.parent.iterdir()
                 if p.name.startswith('.epoch_2.pth.tmp')]
    assert len(leftovers) == 1
    if phase == 'write':
        assert not is_complete_checkpoint(str(leftovers[0]))
    assert find_resumable_checkpoint(str(tmp_path / 'work')) == str(target)
    # The next start (tools/train.py: prepare_work_dir) removes it: its
    # writer is dead. A live writer's temp file and other files stay.
    live = target.parent / f'.epoch_3.pth.tmp{os.getpid()}_0123abcd'
    live.write_bytes(b'x')
    other = target.parent / '.notes.tmp'
    other.write_bytes(b'x')
    assert remove_stale_temp_files(str(target.parent)) == [str(leftovers[0])]
    assert sorted(p.name for p in target.parent.iterdir()) == sorted(
        [live.name, other.name, 'epoch_2.pth', 'last_checkpoint'])


def test_prepare_work_dir_cleans_and_checks(tmp_path):
    from sapiens_mm.engine.runner_cfg import prepare_work_dir
    work = tmp_path / 'w'
    work.mkdir()
    # pid 2**22 + 7: above any pid_max default, so no such process
    stale = work / f'.iter_8.pth.tmp{2**22 + 7}_deadbeef'
    stale.write_bytes(b'partial')
    from mmengine.config import Config
    assert prepare_work_dir(Config(dict(work_dir=str(work)))) == str(work)
    assert not stale.exists()
    blocker = tmp_path / 'file'
    blocker.write_text('')
    with pytest.raises(OSError, match='Cannot write to the work dir'):
        prepare_work_dir(Config(dict(work_dir=str(blocker / 'sub'))))


def test_full_disk_leaves_no_partial_file_and_names_the_path(tmp_path,
                                                             monkeypatch):
    """ENOSPC half-way through a write (simulated): the error names the
    file, keeps errno, and neither the target nor a temp file remains."""
    import errno
    target = tmp_path / 'out' / 'depth.npy'
    simulate_full_disk(monkeypatch)
    with pytest.raises(OSError) as err:
        atomic_write(b'x' * 1000, target)
    assert err.value.errno == errno.ENOSPC
    assert str(target) in str(err.value) and 'disk is full' in str(err.value)
    assert os.listdir(target.parent) == []


def test_path_writer_that_fails_keeps_the_previous_file(tmp_path):
    """A path-taking writer (torch.export.save, safetensors) inside
    atomic_path: a failure after a partial write leaves the previous
    content and no temporary file; success replaces the file whole, and
    the temporary name is one remove_stale_temp_files knows."""
    import errno
    target = tmp_path / 'model.pt2'
    target.write_bytes(b'previous')
    with pytest.raises(OSError) as err:
        with atomic_path(target) as tmp:
            with open(tmp, 'wb') as f:
                f.write(b'partial')
            raise OSError(errno.ENOSPC, 'No space left on device')
    assert err.value.errno == errno.ENOSPC
    assert str(target) in str(err.value) and 'disk is full' in str(err.value)
    assert os.listdir(tmp_path) == ['model.pt2']
    assert target.read_bytes() == b'previous'
    with atomic_path(target) as tmp:
        assert os.path.dirname(tmp) == str(tmp_path)
        assert os.path.basename(tmp).startswith('.model.pt2.tmp')
        with open(tmp, 'wb') as f:
            f.write(b'new')
    assert target.read_bytes() == b'new'
    assert os.listdir(tmp_path) == ['model.pt2']


def test_atomic_write_replaces_whole_file(tmp_path):
    target = tmp_path / 'sub' / 'f.txt'
    atomic_write('first', target)
    atomic_write(b'second', target)
    assert target.read_text() == 'second'
    assert os.listdir(target.parent) == ['f.txt']
    backend = AtomicLocalBackend()
    backend.put_text('third', str(target))
    assert backend.get_text(str(target)) == 'third'
    mode = os.stat(target).st_mode & 0o777
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask  # like open(..., 'w'), not 0o600


def _save(path, epoch):
    torch.save({'state_dict': {'w': torch.full((64, ), float(epoch))},
                'meta': {'epoch': epoch}}, str(path))


def test_resume_auto_skips_truncated_and_missing_checkpoints(tmp_path):
    work = tmp_path / 'work'
    work.mkdir()
    assert find_resumable_checkpoint(str(work)) is None
    for e in (1, 2, 3):
        _save(work / f'epoch_{e}.pth', e)
        time.sleep(0.01)
    assert is_complete_checkpoint(str(work / 'epoch_3.pth'))
    last = work / 'last_checkpoint'

    # Normal case: last_checkpoint names a complete file.
    last.write_text(str(work / 'epoch_3.pth'))
    assert find_resumable_checkpoint(str(work)) == str(work / 'epoch_3.pth')
    # Work dir moved: the recorded path is stale, the same name inside the
    # work dir is used.
    last.write_text('/elsewhere/old_work/epoch_3.pth')
    assert find_resumable_checkpoint(str(work)) == str(work / 'epoch_3.pth')

    # A checkpoint cut short (written without the atomic backend, or lost
    # page cache after a node crash) is skipped for the previous one.
    data = (work / 'epoch_3.pth').read_bytes()
    (work / 'epoch_3.pth').write_bytes(data[:len(data) // 2])
    assert not is_complete_checkpoint(str(work / 'epoch_3.pth'))
    last.write_text(str(work / 'epoch_3.pth'))
    assert find_resumable_checkpoint(str(work)) == str(work / 'epoch_2.pth')
    # Zero-filled tail (file size allocated, data never written).
    (work / 'epoch_3.pth').write_bytes(data[:100] + bytes(len(data) - 100))
    assert find_resumable_checkpoint(str(work)) == str(work / 'epoch_2.pth')
    # last_checkpoint emptied or cut by a kill during its own write.
    last.write_text('')
    assert find_resumable_checkpoint(str(work)) == str(work / 'epoch_2.pth')
    last.write_text(str(work / 'epo'))
    assert find_resumable_checkpoint(str(work)) == str(work / 'epoch_2.pth')
    # Points at a deleted file (max_keep_ckpts=1 removes the old one first).
    last.write_text(str(work / 'epoch_9.pth'))
    assert find_resumable_checkpoint(str(work)) == str(work / 'epoch_2.pth')
    # The picked file really loads.
    assert load_file(find_resumable_checkpoint(str(work)))['meta'] == {
        'epoch': 2}


def test_build_train_cfg_resume_auto(tmp_path):
    cfg_file = tmp_path / 'c.py'
    cfg_file.write_text(
        "optim_wrapper = dict(optimizer=dict(type='SGD', lr=1))\n"
        "load_from = 'pretrained.pth'\n")
    work = tmp_path / 'work'
    # Nothing to resume: plain start from the config's load_from.
    cfg = build_train_cfg(str(cfg_file), work_dir=str(work), resume='auto')
    assert cfg.resume is False and cfg.load_from == 'pretrained.pth'
    work.mkdir()
    _save(work / 'epoch_1.pth', 1)
    _save(work / 'epoch_2.pth', 2)
    (work / 'epoch_2.pth').write_bytes(b'PK\x03\x04truncated')
    (work / 'last_checkpoint').write_text(str(work / 'epoch_2.pth'))
    cfg = build_train_cfg(str(cfg_file), work_dir=str(work), resume='auto')
    assert cfg.resume is True
    assert cfg.load_from == str(work / 'epoch_1.pth')
    # Only broken checkpoints: start over instead of failing to load.
    (work / 'epoch_1.pth').write_bytes(b'')
    cfg = build_train_cfg(str(cfg_file), work_dir=str(work), resume='auto')
    assert cfg.resume is False and cfg.load_from == 'pretrained.pth'


def test_zipfile_check_reads_only_the_directory(tmp_path):
    """is_complete_checkpoint trusts the zip directory: a torch.save file
    has one, with a data.pkl record."""
    p = tmp_path / 'x.pth'
    torch.save({'a': torch.zeros(3)}, str(p))
    with zipfile.ZipFile(p) as zf:
        assert any(n.endswith('/data.pkl') for n in zf.namelist())
    other = tmp_path / 'y.zip'
    with zipfile.ZipFile(other, 'w') as zf:
        zf.writestr('readme.txt', 'not a checkpoint')
    assert is_complete_checkpoint(str(p))
    assert not is_complete_checkpoint(str(other))
    assert not is_complete_checkpoint(str(tmp_path / 'missing.pth'))


def test_reseed_hook_draws_depend_only_on_seed_and_position():
    import random

    import numpy as np

    from sapiens_mm.engine import ReseedHook

    def draws(hook, kind, index):
        hook.reseed(kind, index)
        return (random.random(), float(np.random.rand()),
                float(torch.rand(())))

    from types import SimpleNamespace

    from mmengine.config import Config
    runner = SimpleNamespace(seed=3, cfg=Config())
    a, b = ReseedHook(), ReseedHook()
    a.before_train(runner)  # base seed: the Runner's
    b.before_train(runner)
    first = draws(a, 2, 10)
    draws(a, 2, 11)  # whatever happened in between ...
    torch.rand(100)
    assert draws(a, 2, 10) == first == draws(b, 2, 10)  # ... same numbers
    assert draws(a, 2, 11) != first  # next iteration: new numbers
    assert draws(a, 1, 10) != first  # epoch 10 != iteration 10
    b._rank = 1  # randomness.diff_rank_seed=True
    assert draws(b, 2, 10) != first
    c = ReseedHook(seed=4)  # explicit seed wins over the Runner's
    c.before_train(runner)
    assert draws(c, 2, 10) != first


_VALIDATIONS = []


def _best_runner(work_dir, max_epochs, load_from=None, guard=True):
    """ToyModel trained with validation every epoch and save_best: the
    metric (EpochMetric) improves at every validation, so each one saves a
    new best checkpoint and removes the previous one."""
    import uuid

    from cluster_helpers import ToyData, ToyModel
    from mmengine.evaluator import BaseMetric
    from mmengine.registry import METRICS
    from mmengine.runner import Runner

    from sapiens_mm.engine import BestCheckpointGuardHook

    @METRICS.register_module(force=True)
    class EpochMetric(BaseMetric):

        def process(self, data_batch, data_samples):
            self.results.append(0)

        def compute_metrics(self, results):
            _VALIDATIONS.append(1)  # one more than any earlier validation
            return dict(score=float(len(_VALIDATIONS)))

    class ValToy(ToyModel):

        def forward(self, x, y, scale, mode='loss'):
            if mode == 'loss':
                return super().forward(x, y, scale, mode)
            return [dict()] * len(x)

    loader = dict(dataset=ToyData(n=4), batch_size=2, num_workers=0,
                  sampler=dict(type='DefaultSampler', shuffle=False),
                  collate_fn=dict(type='default_collate'))
    return Runner(
        model=ValToy(), work_dir=str(work_dir),
        train_dataloader=loader, val_dataloader=loader,
        val_evaluator=dict(type='EpochMetric'),
        val_cfg=dict(), optim_wrapper=dict(
            optimizer=dict(type='SGD', lr=0.01)),
        train_cfg=dict(by_epoch=True, max_epochs=max_epochs, val_interval=1),
        default_hooks=dict(checkpoint=dict(
            type='CheckpointHook', interval=1, save_best='score',
            rule='greater')),
        custom_hooks=[BestCheckpointGuardHook()] if guard else [],
        load_from=None if load_from is None else str(load_from),
        resume=load_from is not None,
        experiment_name=f'best_{uuid.uuid4().hex}',
        default_scope='mmengine')


@pytest.mark.parametrize('guard', [True, False])
def test_resume_never_deletes_another_runs_best_checkpoint(tmp_path, guard):
    """Resuming run B (new work dir) from run A's checkpoint must keep A's
    best checkpoint; a crafted checkpoint naming any file must not delete
    it; resuming a run in its own work dir still replaces its own best.
    ``guard=False`` shows what mmengine alone does."""
    run_a = tmp_path / 'a'
    _best_runner(run_a, max_epochs=1).train()
    best_a = run_a / 'best_score_epoch_1.pth'
    assert best_a.is_file()

    _best_runner(tmp_path / 'b', max_epochs=2, load_from=run_a /
                 'epoch_1.pth', guard=guard).train()
    assert (tmp_path / 'b' / 'best_score_epoch_2.pth').is_file()
    assert best_a.is_file() == guard  # mmengine alone deletes A's file

    # a checkpoint that names an unrelated file as its previous best
    victim = tmp_path / 'thesis.pdf'
    victim.write_bytes(b'precious')
    ckpt = load_file(str(run_a / 'epoch_1.pth'))
    ckpt['message_hub']['runtime_info']['best_ckpt'] = str(victim)
    torch.save(ckpt, str(run_a / 'epoch_1.pth'))
    _best_runner(run_a, max_epochs=2, load_from=run_a / 'epoch_1.pth',
                 guard=guard).train()
    assert victim.is_file() == guard

    if guard:  # own run, own best checkpoint: replaced as usual
        c = tmp_path / 'c'
        _best_runner(c, max_epochs=1).train()
        _best_runner(c, max_epochs=2, load_from=c / 'epoch_1.pth').train()
        assert not (c / 'best_score_epoch_1.pth').exists()
        assert (c / 'best_score_epoch_2.pth').is_file()
