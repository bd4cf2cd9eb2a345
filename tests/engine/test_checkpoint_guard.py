"""A resumed checkpoint never makes mmengine delete files this run did not
write: its ``keep_ckpt_ids`` (the checkpoints ``max_keep_ckpts`` rotates
out) are honoured only for checkpoint files that record the run's own
identity."""
import uuid

import pytest
import torch
from attack_helpers import changed, tree_state
from cluster_helpers import ToyData, ToyModel

from sapiens_mm.checkpoint import load_file
from sapiens_mm.engine import BestCheckpointGuardHook
from sapiens_mm.engine.hooks import RUN_ID_KEY
from sapiens_mm.zoo import safe_checkpoint_loading


@pytest.fixture(autouse=True)
def _safe_loading():
    """Resuming reads the Runner's checkpoints (message hub objects) through
    sapiens_mm's reader, as tools/train.py runs the Runner."""
    with safe_checkpoint_loading():
        yield


def _runner(work_dir, max_epochs, max_keep, load_from=None, guard=True,
            out_dir=None):
    from mmengine.runner import Runner
    loader = dict(dataset=ToyData(n=4), batch_size=2, num_workers=0,
                  sampler=dict(type='DefaultSampler', shuffle=False),
                  collate_fn=dict(type='default_collate'))
    return Runner(
        model=ToyModel(), work_dir=str(work_dir), train_dataloader=loader,
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.01)),
        train_cfg=dict(by_epoch=True, max_epochs=max_epochs),
        default_hooks=dict(checkpoint=dict(
            type='CheckpointHook', interval=1, max_keep_ckpts=max_keep,
            out_dir=None if out_dir is None else str(out_dir))),
        custom_hooks=[BestCheckpointGuardHook()] if guard else [],
        load_from=None if load_from is None else str(load_from),
        resume=load_from is not None,
        experiment_name=f'keep_{uuid.uuid4().hex}',
        default_scope='mmengine')


@pytest.mark.parametrize('guard', [True, False])
def test_foreign_keep_ckpt_ids_delete_nothing(tmp_path, guard):
    """A checkpoint from elsewhere listing ids 2..14 is resumed into a work
    dir holding epoch_4/6/10/12.pth (mmengine alone deletes them all:
    ``guard=False``); with the guard they stay, and the run's own
    checkpoints are written as usual."""
    _runner(tmp_path / 'a', max_epochs=1, max_keep=2).train()
    ckpt = load_file(str(tmp_path / 'a' / 'epoch_1.pth'))
    ckpt['message_hub']['runtime_info']['keep_ckpt_ids'] = [
        2, 4, 6, 10, 12, 14]
    crafted = tmp_path / 'downloaded.pth'
    torch.save(ckpt, str(crafted))
    work = tmp_path / 'b'
    work.mkdir()
    victims = [work / f'epoch_{i}.pth' for i in (4, 6, 10, 12)]
    for v in victims:
        v.write_bytes(b'an earlier run of mine')
    _runner(work, max_epochs=2, max_keep=2, load_from=crafted,
            guard=guard).train()
    assert (work / 'epoch_2.pth').is_file()
    assert [v.is_file() for v in victims] == [guard] * 4


def test_own_keep_ckpt_ids_still_rotate(tmp_path):
    """Resuming a run's own newest checkpoint keeps max_keep_ckpts working:
    its older checkpoint is rotated out."""
    work = tmp_path / 'c'
    _runner(work, max_epochs=2, max_keep=2).train()
    assert (work / 'epoch_1.pth').is_file()
    _runner(work, max_epochs=3, max_keep=2,
            load_from=work / 'epoch_2.pth').train()
    assert not (work / 'epoch_1.pth').exists()
    assert (work / 'epoch_2.pth').is_file() and \
        (work / 'epoch_3.pth').is_file()


def test_own_keep_ckpt_ids_rotate_in_an_out_dir_named_like_the_work_dir(
        tmp_path):
    """CheckpointHook(out_dir=D) saves into D/<work dir's name> (mmengine
    joins them in every case), also when D itself ends with that name: the
    guard looks where the checkpoints are, so rotation keeps working."""
    work, out = tmp_path / 'exp', tmp_path / 'store' / 'exp'
    saved = out / 'exp'  # where mmengine writes
    _runner(work, max_epochs=2, max_keep=2, out_dir=out).train()
    assert (saved / 'epoch_1.pth').is_file()
    _runner(work, max_epochs=3, max_keep=2, out_dir=out,
            load_from=saved / 'epoch_2.pth').train()
    assert not (saved / 'epoch_1.pth').exists()
    assert (saved / 'epoch_2.pth').is_file() and \
        (saved / 'epoch_3.pth').is_file()


def test_resume_of_plain_weights_is_one_clear_line(tmp_path):
    """``--resume`` of a state dict (no training state): refused before the
    runner starts, saying to use load_from; a runner checkpoint passes."""
    from sapiens_mm.engine.runner_cfg import build_train_cfg
    from tiny_configs import TINY
    weights = tmp_path / 'weights.pth'
    torch.save(ToyModel().state_dict(), str(weights))
    with pytest.raises(ValueError, match=r'not a training checkpoint.*'
                       r'load_from='):
        build_train_cfg(str(TINY['seg']), work_dir=str(tmp_path / 'w'),
                        resume=str(weights))
    _runner(tmp_path / 'a', max_epochs=1, max_keep=1).train()
    cfg = build_train_cfg(str(TINY['seg']), work_dir=str(tmp_path / 'w'),
                          resume=str(tmp_path / 'a' / 'epoch_1.pth'))
    assert cfg.resume and cfg.load_from.endswith('epoch_1.pth')


def test_foreign_checkpoint_copied_in_as_the_newest_deletes_nothing(
        tmp_path):
    """The user's run writes epoch_1.pth and epoch_2.pth; a checkpoint of
    another run, its ``keep_ckpt_ids`` set to [1, 2, 5], is copied into the
    work dir as epoch_5.pth (the newest id it lists) and resumed with
    max_keep_ckpts=1. mmengine alone deletes the user's two checkpoints;
    with the guard neither they nor any other file outside the run's new
    output changes, one warning line names the dropped ids, and the
    resumed run still rotates the checkpoints it writes itself."""
    work = tmp_path / 'work'
    _runner(work, max_epochs=2, max_keep=3).train()
    other = tmp_path / 'elsewhere'
    _runner(other, max_epochs=1, max_keep=3).train()
    ckpt = load_file(str(other / 'epoch_1.pth'))
    ckpt['message_hub']['runtime_info']['keep_ckpt_ids'] = [1, 2, 5]
    ckpt['meta']['epoch'] = 5
    ckpt['message_hub']['runtime_info']['epoch'] = 5
    torch.save(ckpt, str(work / 'epoch_5.pth'))
    mine = {p: p.read_bytes() for p in (work / 'epoch_1.pth',
                                        work / 'epoch_2.pth')}
    before = tree_state(tmp_path)
    _runner(work, max_epochs=7, max_keep=1,
            load_from=work / 'epoch_5.pth').train()
    for path, data in mine.items():
        assert path.read_bytes() == data, f'{path.name} was deleted'
    # (the runs' log folders are named by the second they start in, so
    # the resumed run may log into the first run's folder: not compared)
    diff = {p: w for p, w in changed(before, tree_state(tmp_path)).items()
            if not p.startswith('work/20')}
    new = {p for p, what in diff.items() if what == 'appeared'}
    assert {p: w for p, w in diff.items() if p not in new} == {
        'work/epoch_5.pth': 'deleted', 'work/last_checkpoint': 'changed'}
    # the run's own checkpoints: epoch_6 rotated out by epoch_7
    assert 'work/epoch_7.pth' in new and 'work/epoch_6.pth' not in new
    logs = sorted(work.glob('*/*.log'))[-1].read_text()
    lines = [ln for ln in logs.splitlines() if 'keep_ckpt_ids=[1, 2, 5]' in
             ln]
    assert len(lines) == 1 and '[1, 2] are not checkpoints this run wrote' \
        in lines[0], lines


def test_run_identity_survives_resume(tmp_path):
    """Every checkpoint of a run, and of its resumes, records the same
    identity; a fresh run draws another."""
    work = tmp_path / 'w'
    _runner(work, max_epochs=1, max_keep=3).train()
    _runner(work, max_epochs=2, max_keep=3,
            load_from=work / 'epoch_1.pth').train()
    ids = [load_file(str(work / f'epoch_{i}.pth'))['message_hub'][
        'runtime_info'][RUN_ID_KEY] for i in (1, 2)]
    assert ids[0] == ids[1] and len(ids[0]) == 32
    _runner(tmp_path / 'x', max_epochs=1, max_keep=3).train()
    assert load_file(str(tmp_path / 'x' / 'epoch_1.pth'))['message_hub'][
        'runtime_info'][RUN_ID_KEY] != ids[0]
