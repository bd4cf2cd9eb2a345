"""Sapiens2 checkpoints: official .safetensors layouts load strictly (direct,
Pretrained init_cfg, Runner load_from / resume), files that do not fit are
refused with every problem listed, and what we write loads back.
"""
import os
import pickle
import struct

import numpy as np
import pytest
import torch
import torch.nn as nn
from mmengine.model import BaseModel
from mmengine.registry import DefaultScope
from mmengine.runner import Runner
from mmengine.runner.checkpoint import _load_checkpoint
from safetensors.torch import load_file as st_load
from safetensors.torch import save_file as st_save

from sapiens_mm.checkpoint import (
    CheckpointTypeError,
    add_official_layout_hook,
    add_trusted_types,
    from_official_layout,
    is_safetensors_file,
    load_backbone_checkpoint,
    load_checkpoint,
    load_file,
    save_official_checkpoint,
    save_safetensors,
    to_official_layout,
)
from sapiens_mm.models import Sapiens2VisionTransformer, SapiensVisionTransformer
from sapiens_mm.zoo import safe_checkpoint_loading


@pytest.fixture(autouse=True)
def _safe_loading():
    """mmengine's loader (Runner load_from / resume) reads local files
    through sapiens_mm's reader inside safe_checkpoint_loading(), as
    tools/train.py and tools/test.py run the Runner."""
    with safe_checkpoint_loading():
        yield


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
    # mmengine's own loader (Runner resume / load_from) is routed here too,
    # inside safe_checkpoint_loading (this module's fixture)
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


@pytest.fixture(autouse=True)
def _restore_default_scope():
    # mmengine's Runner makes its scope the process-wide current one; this
    # context restores the previous state afterwards, so that later test
    # files do not build from the wrong registry.
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        yield


def tiny(**kwargs):
    return Sapiens2VisionTransformer('sapiens2_tiny', **kwargs)


def assert_same_state(a: nn.Module, b: nn.Module):
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    for k in sa:
        assert sa[k].dtype == sb[k].dtype, k
        assert torch.equal(sa[k], sb[k]), k


class TinyEstimator(BaseModel):
    """Backbone + a head named like mmseg's (``decode_head``) or mmpose's
    (``head``); trains with mmengine's Runner."""

    def __init__(self, head_name='decode_head'):
        super().__init__()
        self.backbone = tiny(out_type='cls_token')
        setattr(self, head_name, nn.Linear(64, 3))
        self.head_name = head_name

    def forward(self, inputs, data_samples=None, mode='tensor'):
        x = torch.stack(inputs) if isinstance(inputs, list) else inputs
        out = getattr(self, self.head_name)(self.backbone(x)[0])
        if mode == 'loss':
            return dict(loss=out.square().mean())
        return out


class Images(torch.utils.data.Dataset):

    def __len__(self):
        return 4

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return dict(inputs=torch.randn(3, 32, 32, generator=g))


def runner(tmp_path, model, max_iters, **kwargs):
    return Runner(
        model=model, work_dir=str(tmp_path / 'work'),
        train_dataloader=dict(dataset=Images(), batch_size=2,
                              sampler=dict(type='DefaultSampler',
                                           shuffle=False)),
        train_cfg=dict(by_epoch=False, max_iters=max_iters),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.1)),
        default_hooks=dict(checkpoint=dict(type='CheckpointHook',
                                           interval=1, by_epoch=False),
                           logger=dict(type='LoggerHook', interval=1)),
        default_scope='mmpretrain', **kwargs)


# ------------------------------------------------------------ reading
def test_pretrain_safetensors_loads_strictly_with_the_bf16_buffer(tmp_path):
    src = tiny()
    path = tmp_path / 'sapiens2_tiny_pretrain.safetensors'
    save_official_checkpoint(src, str(path))
    raw = st_load(str(path))  # the file itself, read by safetensors
    assert set(raw) == set(src.state_dict())  # flat official keys
    assert raw['rope_embed.periods'].dtype == torch.bfloat16
    dst = tiny()
    load_backbone_checkpoint(dst, str(path))
    assert_same_state(src, dst)
    # The same through Pretrained init_cfg.
    init = tiny(init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    init.init_weights()
    assert_same_state(src, init)


def test_task_file_backbone_and_decode_head_keys(tmp_path):
    src = TinyEstimator()
    path = tmp_path / 'sapiens2_tiny_seg.safetensors'
    written = save_official_checkpoint(src, str(path))
    assert {k.split('.')[0] for k in written} == {'backbone', 'decode_head'}
    dst = TinyEstimator()
    load_checkpoint(dst, str(path))
    assert_same_state(src, dst)
    # Pretrained init of the backbone alone takes the backbone. keys.
    bb = tiny(init_cfg=dict(type='Pretrained', checkpoint=str(path)))
    bb.init_weights()
    assert_same_state(src.backbone, bb)


def test_pose_file_decode_head_goes_to_an_mmpose_head(tmp_path):
    pose = TinyEstimator(head_name='head')
    state = to_official_layout(pose)
    assert 'decode_head.weight' in state and 'head.weight' not in state
    path = tmp_path / 'sapiens2_tiny_pose.safetensors'
    save_safetensors(state, str(path))
    dst = TinyEstimator(head_name='head')
    load_checkpoint(dst, str(path))  # strict
    assert_same_state(pose, dst)
    # Runner load_from (mmengine, non-strict) with the hook installed.
    hooked = add_official_layout_hook(TinyEstimator(head_name='head'))
    loaded = runner(tmp_path, hooked, max_iters=1, load_from=str(path))
    loaded.load_or_resume()
    assert_same_state(pose, hooked)
    # A model that has a decode_head keeps the names as they are.
    seg = TinyEstimator()
    assert list(from_official_layout(state, seg)) == list(state)


def test_task_file_without_periods_still_loads_strictly(tmp_path):
    # Whether the released task files hold the deterministic periods buffer
    # is not verified; one without it must load all the same.
    src = TinyEstimator()
    state = to_official_layout(src)
    state.pop('backbone.rope_embed.periods')
    path = tmp_path / 'no_periods.safetensors'
    save_safetensors(state, str(path))
    dst = TinyEstimator()
    with torch.no_grad():
        dst.backbone.rope_embed.periods.zero_()
    load_checkpoint(dst, str(path))
    assert_same_state(src, dst)


def test_stored_dtype_is_cast_to_the_model(tmp_path):
    src = tiny()
    half = {k: v.bfloat16() for k, v in src.state_dict().items()}
    path = tmp_path / 'bf16.safetensors'
    save_safetensors(half, str(path))
    dst = tiny()
    load_backbone_checkpoint(dst, str(path))
    w = dst.blocks[0].attn.wq.weight
    assert w.dtype == torch.float32
    assert torch.equal(w, src.blocks[0].attn.wq.weight.bfloat16().float())


# ----------------------------------------------------------- refusing
def test_a_file_that_does_not_fit_lists_every_problem(tmp_path):
    state = to_official_layout(tiny())
    state.pop('blocks.1.ffn.w3.bias')  # missing
    state['blocks.0.attn.qkv.weight'] = torch.zeros(3)  # unexpected
    state['blocks.1.attn.wk.weight'] = torch.zeros(32, 64)  # wrong shape
    path = tmp_path / 'bad.safetensors'
    save_safetensors(state, str(path))
    dst = tiny()
    before = {k: v.clone() for k, v in dst.state_dict().items()}
    with pytest.raises(RuntimeError) as err:
        load_backbone_checkpoint(dst, str(path))
    msg = str(err.value)
    assert '1 missing keys [blocks.1.ffn.w3.bias]' in msg
    assert '1 unexpected keys [blocks.0.attn.qkv.weight]' in msg
    assert ('1 wrong-shape keys [blocks.1.attn.wk.weight: checkpoint '
            '(32, 64) vs model (64, 64)]') in msg
    assert str(path) in msg
    # Nothing was loaded.
    for k, v in dst.state_dict().items():
        assert torch.equal(v, before[k]), k


def test_missing_or_unexpected_keys_alone_are_refused(tmp_path):
    state = to_official_layout(tiny())
    state['tokenizer.w_cls'] = torch.zeros(1, 1, 64)
    path = tmp_path / 'extra.safetensors'
    save_safetensors(state, str(path))
    with pytest.raises(RuntimeError, match=r'unexpected keys \[tokenizer'):
        load_backbone_checkpoint(tiny(), str(path))
    # A v1 Sapiens backbone file in a Sapiens2 model: all keys listed.
    from sapiens_mm.models import SapiensVisionTransformer
    v1 = SapiensVisionTransformer('sapiens_tiny', img_size=(32, 32))
    save_safetensors(v1.state_dict(), str(path))
    with pytest.raises(RuntimeError, match='missing keys .*cls_token'):
        load_backbone_checkpoint(tiny(), str(path))


@pytest.mark.parametrize('content', [
    b'',  # empty
    struct.pack('<Q', 1 << 40) + b'{',  # header longer than the file
    b'not a checkpoint at all',
])
def test_broken_safetensors_file_gives_a_clear_error(tmp_path, content):
    path = tmp_path / 'broken.safetensors'
    path.write_bytes(content)
    with pytest.raises(ValueError, match='Cannot read safetensors file .*'
                       'broken.safetensors'):
        load_file(str(path))


def test_truncated_download_is_refused(tmp_path):
    path = tmp_path / 'part.safetensors'
    save_safetensors(tiny().state_dict(), str(path))
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])
    with pytest.raises(ValueError, match='download complete'):
        load_file(str(path))


def test_a_pickle_named_safetensors_is_never_unpickled(tmp_path):
    class Boom:
        def __reduce__(self):
            return (open, (str(tmp_path / 'ran'), 'w'))

    path = tmp_path / 'evil.safetensors'
    torch.save({'x': Boom()}, path)
    with pytest.raises(ValueError, match='Cannot read safetensors'):
        load_file(str(path))
    assert not (tmp_path / 'ran').exists()


def test_safetensors_recognised_by_content_too(tmp_path):
    path = tmp_path / 'weights.bin'
    st_save({'a': torch.ones(2)}, str(path))
    assert is_safetensors_file(str(path))
    assert torch.equal(load_file(str(path))['a'], torch.ones(2))
    torch.save({'a': torch.ones(2)}, tmp_path / 'w.pth')
    assert not is_safetensors_file(str(tmp_path / 'w.pth'))


# -------------------------------------------------------------- Runner
def test_runner_checkpoints_round_trip_load_from_and_resume(tmp_path):
    torch.manual_seed(0)
    first = runner(tmp_path, TinyEstimator(), max_iters=2)
    first.train()
    ckpt = tmp_path / 'work' / 'iter_2.pth'
    saved = load_file(str(ckpt))
    assert saved['state_dict']['backbone.rope_embed.periods'].dtype == \
        torch.bfloat16
    # What the Runner wrote loads back strictly.
    again = TinyEstimator()
    load_checkpoint(again, str(ckpt))
    assert_same_state(first.model, again)
    # --resume: continues from iteration 2 with the saved weights.
    resumed = runner(tmp_path, TinyEstimator(), max_iters=3,
                     load_from=str(ckpt), resume=True)
    resumed.load_or_resume()
    assert resumed.iter == 2
    assert_same_state(first.model, resumed.model)
    resumed.train()
    assert resumed.iter == 3
    # load_from an official-layout safetensors written from our model.
    official = tmp_path / 'sapiens2_tiny_seg.safetensors'
    save_official_checkpoint(first.model, str(official))
    fresh = runner(tmp_path, TinyEstimator(), max_iters=1,
                   load_from=str(official))
    fresh.load_or_resume()
    assert_same_state(first.model, fresh.model)


def test_shipped_pose_config_loads_an_official_file_through_load_from(
        tmp_path):
    """The shipped Sapiens2 pose config loads an official-layout task file
    (head under ``decode_head.*``) through mmengine's non-strict loader,
    which is what Runner ``load_from`` calls: the head weights arrive too
    (with plain ``TopdownPoseEstimator`` they were skipped silently)."""
    from mmengine.runner.checkpoint import load_checkpoint as mm_load

    from sapiens_mm import get_config
    from sapiens_mm.apis import init_model
    cfg = get_config('sapiens2_tiny-goliath-256x192')
    cfg.model.backbone.init_cfg = None
    src = init_model(cfg)
    path = tmp_path / 'sapiens2_tiny_pose.safetensors'
    save_official_checkpoint(src, str(path))
    assert any(k.startswith('decode_head.') for k in st_load(str(path)))
    torch.manual_seed(1)
    dst = init_model(cfg)
    assert not torch.equal(dst.head.conv_pose.weight,
                           src.head.conv_pose.weight)
    mm_load(dst, str(path), map_location='cpu', strict=False)
    assert_same_state(src, dst)
