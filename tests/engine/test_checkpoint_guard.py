"""A resumed checkpoint never makes mmengine delete files this run did not
write: its ``keep_ckpt_ids`` (the checkpoints ``max_keep_ckpts`` rotates
out) are honoured only for the run's own newest checkpoint."""
import uuid

import pytest
import torch
from cluster_helpers import ToyData, ToyModel

from sapiens_mm.checkpoint import load_file
from sapiens_mm.engine import BestCheckpointGuardHook
from sapiens_mm.zoo import safe_checkpoint_loading


@pytest.fixture(autouse=True)
def _safe_loading():
    """Resuming reads the Runner's checkpoints (message hub objects) through
    sapiens_mm's reader, as tools/train.py runs the Runner."""
    with safe_checkpoint_loading():
        yield


def _runner(work_dir, max_epochs, max_keep, load_from=None, guard=True):
    from mmengine.runner import Runner
    loader = dict(dataset=ToyData(n=4), batch_size=2, num_workers=0,
                  sampler=dict(type='DefaultSampler', shuffle=False),
                  collate_fn=dict(type='default_collate'))
    return Runner(
        model=ToyModel(), work_dir=str(work_dir), train_dataloader=loader,
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.01)),
        train_cfg=dict(by_epoch=True, max_epochs=max_epochs),
        default_hooks=dict(checkpoint=dict(
            type='CheckpointHook', interval=1, max_keep_ckpts=max_keep)),
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
