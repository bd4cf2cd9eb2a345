import os
import pickle

import numpy as np
import pytest
import torch
import torch.nn as nn
from mmengine.model import BaseModel
from mmengine.runner import Runner
from mmengine.runner.checkpoint import _load_checkpoint

from sapiens_mm.checkpoint import (CheckpointTypeError, add_trusted_types,
                                   load_backbone_checkpoint, load_checkpoint,
                                   load_file)
from sapiens_mm.models import SapiensVisionTransformer


class Estimator(nn.Module):
    """Backbone + head laid out like an official task checkpoint."""

    def __init__(self):
        super().__init__()
        self.backbone = SapiensVisionTransformer(arch='sapiens_tiny',
                                                 img_size=(32, 32))
        self.head = nn.Conv2d(64, 3, 1)


class CodeRunner:
    """Unpickling this runs a shell command."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f'touch {self.marker}', ))


class Custom:
    """A harmless class outside the allowlist."""

    def __init__(self):
        self.value = 3


def test_refuses_code_executing_pickle(tmp_path):
    marker = tmp_path / 'pwned'
    path = tmp_path / 'evil.pth'
    torch.save({'state_dict': {}, 'x': CodeRunner(marker)}, path)
    with pytest.raises(CheckpointTypeError, match='system') as err:
        load_file(str(path))
    # never suggests allowlisting the code-running callable itself
    assert 'add_trusted_types' not in str(err.value)
    assert not marker.exists()
    # mmengine's own loader (Runner resume / load_from) is routed here too.
    with pytest.raises(CheckpointTypeError):
        _load_checkpoint(str(path), map_location='cpu')
    assert not marker.exists()


class GetattrGadget:
    """Unpickles as getattr(HistoryBuffer, '__init__'): a step towards
    reaching module globals, which the restricted getattr must refuse."""

    def __reduce__(self):
        from mmengine.logging.history_buffer import HistoryBuffer
        return (getattr, (HistoryBuffer, '__init__'))


def test_getattr_is_restricted_to_history_buffer_statistics(tmp_path):
    path = tmp_path / 'gadget.pth'
    torch.save({'x': GetattrGadget()}, path)
    with pytest.raises(CheckpointTypeError, match='__init__'):
        load_file(str(path))


def test_unknown_type_named_and_can_be_allowed(tmp_path, monkeypatch):
    path = tmp_path / 'custom.pth'
    torch.save({'meta': Custom()}, path)
    name = f'{Custom.__module__}.Custom'
    with pytest.raises(CheckpointTypeError, match=name.replace('.', r'\.')) \
            as err:
        load_file(str(path))
    assert 'add_trusted_types' in str(err.value)  # a data class: may be
    monkeypatch.setenv('SAPIENS_MM_TRUSTED_TYPES', name)
    assert load_file(str(path))['meta'].value == 3
    monkeypatch.delenv('SAPIENS_MM_TRUSTED_TYPES')
    add_trusted_types([Custom])
    assert load_file(str(path))['meta'].value == 3


def test_missing_file_message(tmp_path):
    with pytest.raises(FileNotFoundError, match='not found'):
        load_file(str(tmp_path / 'nope.pth'))


def test_official_clean_backbone_state_dict(tmp_path):
    src = SapiensVisionTransformer(arch='sapiens_tiny', img_size=(32, 32))
    path = tmp_path / 'sapiens_tiny_clean.pth'
    torch.save(src.state_dict(), path)
    dst = SapiensVisionTransformer(arch='sapiens_tiny', img_size=(32, 32))
    load_backbone_checkpoint(dst, str(path))
    for k, v in src.state_dict().items():
        torch.testing.assert_close(dst.state_dict()[k], v)
    # A missing key is an error, not a warning.
    state = src.state_dict()
    state.pop('layers.0.attn.qkv.weight')
    torch.save(state, path)
    with pytest.raises(RuntimeError, match='layers.0.attn.qkv.weight'):
        load_backbone_checkpoint(dst, str(path))


def test_pretrained_init_cfg_is_strict(tmp_path):
    src = Estimator()
    path = tmp_path / 'full.pth'
    torch.save({'state_dict': src.state_dict(), 'meta': {}}, path)
    bb = SapiensVisionTransformer(
        arch='sapiens_tiny', img_size=(32, 32),
        init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    bb.init_weights()
    torch.testing.assert_close(bb.pos_embed, src.backbone.pos_embed)


def test_official_full_checkpoint_with_numpy_meta(tmp_path):
    src = Estimator()
    path = tmp_path / 'sapiens_tiny_task.pth'
    meta = dict(epoch=3, dataset_meta=dict(sigmas=np.ones(17) * 0.1,
                                           flip_indices=[1, 0]),
                seed=np.int64(0), hook_msgs=dict(best_score=np.float64(0.5)))
    torch.save({'state_dict': src.state_dict(), 'meta': meta}, path)
    # Without the allowlist torch refuses numpy objects (the bug we fix).
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path, weights_only=True)
    dst = Estimator()
    ckpt = load_checkpoint(dst, str(path))
    assert ckpt['meta']['epoch'] == 3
    torch.testing.assert_close(dst.head.weight, src.head.weight)
    # Plain state dict with a DDP prefix.
    torch.save({'module.' + k: v for k, v in src.state_dict().items()}, path)
    load_checkpoint(Estimator(), str(path))
    # Wrong task: strict check names the offending keys.
    torch.save({'state_dict': {'head.weight': torch.zeros(1)}}, path)
    with pytest.raises(RuntimeError, match='head.weight'):
        load_checkpoint(dst, str(path))


class ToyModel(BaseModel):

    def __init__(self):
        super().__init__()
        self.backbone = SapiensVisionTransformer(arch='sapiens_tiny',
                                                 img_size=(32, 32))
        self.head = nn.Linear(64, 2)

    def forward(self, inputs, labels, mode='tensor'):
        feat = self.backbone(inputs)[0].mean((2, 3))
        logits = self.head(feat)
        if mode == 'loss':
            return dict(loss=nn.functional.cross_entropy(logits, labels))
        return logits


class ToyData(torch.utils.data.Dataset):
    metainfo = dict(classes=('a', 'b'), sigmas=np.ones(3))

    def __len__(self):
        return 8

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return dict(inputs=torch.randn(3, 32, 32, generator=g),
                    labels=torch.tensor(i % 2))


def make_runner(work_dir, max_epochs, resume=False):
    return Runner(
        model=ToyModel(),
        work_dir=str(work_dir),
        train_dataloader=dict(dataset=ToyData(), batch_size=4,
                              sampler=dict(type='DefaultSampler',
                                           shuffle=True),
                              collate_fn=dict(type='default_collate')),
        optim_wrapper=dict(optimizer=dict(type='AdamW', lr=1e-3)),
        train_cfg=dict(by_epoch=True, max_epochs=max_epochs),
        default_hooks=dict(checkpoint=dict(type='CheckpointHook',
                                           interval=1),
                           logger=dict(type='LoggerHook', interval=1)),
        resume=resume,
        randomness=dict(seed=0),
        default_scope='mmengine')


def test_runner_checkpoint_round_trip_and_resume(tmp_path):
    runner = make_runner(tmp_path, max_epochs=1)
    runner.train()
    path = tmp_path / 'epoch_1.pth'
    ckpt = load_file(str(path))
    assert ckpt['meta']['epoch'] == 1
    assert 'message_hub' in ckpt and 'optimizer' in ckpt
    # Runner checkpoints hold numpy and HistoryBuffer objects.
    with pytest.raises(pickle.UnpicklingError):
        torch.load(path, weights_only=True)

    resumed = make_runner(tmp_path, max_epochs=2, resume=True)
    resumed.train()
    assert resumed.epoch == 2 and resumed.iter == 4
    final = load_file(str(tmp_path / 'epoch_2.pth'))
    load_checkpoint(ToyModel(), str(tmp_path / 'epoch_2.pth'))
    assert final['meta']['iter'] == 4
