"""Sapiens2VisionTransformer: official key layout, RoPE, GQA, options, and
agreement with the independent plain-PyTorch reference.
"""
import json
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from mmpose.registry import MODELS  # a config of another library

from sapiens_mm.checkpoint import load_backbone_checkpoint
from sapiens_mm.models import Sapiens2VisionTransformer, SapiensVisionTransformer
from sapiens_mm.models.layers import (
    GroupedQueryAttention,
    RopePositionEmbedding,
    apply_rope,
)
from sapiens_mm.models.reference import sapiens2_reference_forward
from sapiens_mm.utils import sdpa

OFFICIAL = {
    'sapiens_0.3b': (1024, 24, 4096, 0.3062),
    'sapiens_0.6b': (1280, 32, 5120, 0.6346),
    'sapiens_1b': (1536, 40, 6144, 1.1392),
    'sapiens_2b': (1920, 48, 7680, 2.1319),
}


def official_layout(C, L, F_, grid=3072):
    """Key -> shape of an official fine-tuned Sapiens backbone."""
    shapes = {
        'patch_embed.projection.weight': (C, 3, 16, 16),
        'patch_embed.projection.bias': (C, ),
        'pos_embed': (1, grid, C),
        'ln1.weight': (C, ),
        'ln1.bias': (C, ),
    }
    for i in range(L):
        p = f'layers.{i}.'
        shapes.update({
            p + 'ln1.weight': (C, ), p + 'ln1.bias': (C, ),
            p + 'attn.qkv.weight': (3 * C, C), p + 'attn.qkv.bias': (3 * C, ),
            p + 'attn.proj.weight': (C, C), p + 'attn.proj.bias': (C, ),
            p + 'ln2.weight': (C, ), p + 'ln2.bias': (C, ),
            p + 'ffn.layers.0.0.weight': (F_, C),
            p + 'ffn.layers.0.0.bias': (F_, ),
            p + 'ffn.layers.1.weight': (C, F_), p + 'ffn.layers.1.bias': (C, ),
        })
    return shapes


@pytest.mark.parametrize('arch', sorted(OFFICIAL))
def test_official_key_layout_and_size(arch):
    C, L, F_, billions = OFFICIAL[arch]
    with torch.device('meta'):
        model = SapiensVisionTransformer(arch=arch)
    got = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert got == official_layout(C, L, F_)
    n = sum(p.numel() for p in model.parameters())
    assert round(n / 1e9, 4) == billions


def test_alias_and_dict_arch():
    with torch.device('meta'):
        a = SapiensVisionTransformer(arch='0.3b')
        b = SapiensVisionTransformer(
            arch=dict(embed_dims=1024, num_layers=24, num_heads=16,
                      feedforward_channels=4096))
    assert a.state_dict().keys() == b.state_dict().keys()


def test_bad_arch_message():
    with pytest.raises(ValueError, match='sapiens_0.3b'):
        SapiensVisionTransformer(arch='sapiens_3b')


def tiny(**kwargs):
    kwargs.setdefault('arch', 'sapiens_tiny')
    model = SapiensVisionTransformer(**kwargs)
    model.init_weights()
    return model


@pytest.mark.parametrize('hw,grid', [((1024, 768), (64, 48)),
                                     ((512, 384), (32, 24)),
                                     ((320, 640), (20, 40))])
def test_forward_shapes(hw, grid):
    model = tiny().eval()
    with torch.no_grad():
        out = model(torch.randn(2, 3, *hw))
    assert len(out) == 1
    assert out[0].shape == (2, 64, *grid)


def test_patch_padding_keeps_grid():
    model = tiny(patch_cfg=dict(padding=2)).eval()
    assert model.patch_embed.projection.padding == (2, 2)
    with torch.no_grad():
        assert model(torch.randn(1, 3, 1024, 768))[0].shape == (1, 64, 64, 48)


@pytest.mark.parametrize('out_type,shape', [('raw', (2, 12, 64)),
                                            ('cls_token', (2, 64)),
                                            ('avg_featmap', (2, 64)),
                                            ('featmap', (2, 64, 4, 3))])
def test_out_types(out_type, shape):
    model = tiny(img_size=(64, 48), out_type=out_type,
                 with_cls_token=out_type == 'cls_token').eval()
    with torch.no_grad():
        out = model(torch.randn(2, 3, 64, 48))[0]
    assert out.shape == shape


def test_out_indices_intermediate_not_final_normed():
    model = tiny(img_size=(64, 48), out_indices=[0, -1], out_type='raw')
    model.eval()
    x = torch.randn(1, 3, 64, 48)
    with torch.no_grad():
        first, last = model(x)
        tokens, _ = model.patch_embed(x)
        h = tokens + model.pos_embed
        h0 = model.layers[0](h)
        h1 = model.ln1(model.layers[1](h0))
    torch.testing.assert_close(first, h0)
    torch.testing.assert_close(last, h1)


def test_with_cp_matches_plain_forward_and_grads():
    plain = tiny(img_size=(64, 48), drop_path_rate=0.0).train()
    ckpt = tiny(img_size=(64, 48), with_cp=True).train()
    ckpt.load_state_dict(plain.state_dict())
    x = torch.randn(2, 3, 64, 48)
    out_a, out_b = plain(x)[0], ckpt(x)[0]
    torch.testing.assert_close(out_a, out_b)
    out_a.square().mean().backward()
    out_b.square().mean().backward()
    for (name, pa), (_, pb) in zip(plain.named_parameters(),
                                   ckpt.named_parameters()):
        torch.testing.assert_close(pa.grad, pb.grad, msg=name)


def test_every_parameter_gets_a_gradient():
    model = tiny(img_size=(64, 48)).train()
    out = model(torch.randn(2, 3, 64, 48))[0]
    out.square().mean().backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


def test_frozen_stages_without_cls_token():
    model = tiny(img_size=(64, 48), frozen_stages=1)
    assert not model.patch_embed.projection.weight.requires_grad
    assert not model.pos_embed.requires_grad
    assert all(not p.requires_grad for p in model.layers[0].parameters())
    assert all(p.requires_grad for p in model.layers[1].parameters())


def test_pretrain_pos_embed_drops_cls_and_resizes(tmp_path):
    """A pretraining state dict (cls token, 64x64 grid) loads strictly into
    a fine-tuning model (no cls token, 64x48 grid) with bicubic resizing."""
    pre = tiny(img_size=1024, with_cls_token=True, out_type='raw')
    state = pre.state_dict()
    assert state['pos_embed'].shape == (1, 4097, 64)
    assert 'cls_token' in state
    path = tmp_path / 'sapiens_tiny_epoch_1_clean.pth'
    torch.save(state, path)

    fine = tiny()  # 1024x768, no cls token
    load_backbone_checkpoint(fine, str(path))
    grid = state['pos_embed'][:, 1:].reshape(1, 64, 64, 64).permute(0, 3, 1, 2)
    expected = F.interpolate(grid, size=(64, 48), mode='bicubic',
                             align_corners=False)
    expected = expected.flatten(2).transpose(1, 2)
    torch.testing.assert_close(fine.pos_embed.data, expected)
    torch.testing.assert_close(fine.layers[1].attn.qkv.weight,
                               state['layers.1.attn.qkv.weight'])


def test_pos_embed_resized_at_forward_for_other_sizes():
    model = tiny(img_size=(64, 48)).eval()
    x = torch.randn(1, 3, 128, 96)
    with torch.no_grad():
        out = model(x)[0]
    assert out.shape == (1, 64, 8, 6)


KEYS = json.loads(
    (Path(__file__).resolve().parents[1] / 'data' /
     'sapiens2_backbone_keys.json').read_text())['sizes']


def sapiens2_official_layout(size):
    """The ordered (key, shape) list of an official backbone."""
    d = KEYS[size]
    out = [(k, tuple(s)) for k, s in d['head']]
    for i, p in enumerate(d['blocks']):
        out += [(f'blocks.{i}.{k}', tuple(s))
                for k, s in d['block_patterns'][p]]
    return out + [(k, tuple(s)) for k, s in d['tail']]


@pytest.mark.slow
@pytest.mark.parametrize('size', sorted(KEYS))
def test_official_key_layout_every_size(size):
    with torch.device('meta'):
        model = Sapiens2VisionTransformer(arch=size)
    state = model.state_dict()
    got = [(k, tuple(v.shape)) for k, v in state.items()]
    assert len(got) == KEYS[size]['num_keys']
    assert got == sapiens2_official_layout(size)  # same keys, shapes and order
    assert sum(p.numel() for p in model.parameters()) == KEYS[size]['params']
    non_fp32 = {k: str(v.dtype)[6:] for k, v in state.items()
                if v.dtype != torch.float32}
    assert non_fp32 == KEYS[size]['dtypes']  # the bf16 periods buffer


def test_registered_and_arch_dict():
    tiny = Sapiens2VisionTransformer.arch_zoo['sapiens2_tiny']
    model = MODELS.build(dict(
        type='mmpretrain.Sapiens2VisionTransformer',
        arch={k: tiny[k] for k in ('embed_dims', 'num_layers', 'num_heads',
                                   'feedforward_channels',
                                   'num_tokenizer_layers')}))
    ref = Sapiens2VisionTransformer('sapiens2_tiny')
    assert {k: v.shape for k, v in model.state_dict().items()} == \
        {k: v.shape for k, v in ref.state_dict().items()}


@pytest.mark.parametrize('kwargs, match', [
    (dict(arch='sapiens2_2b'), 'sapiens2_0.4b'),
    (dict(arch=dict(embed_dims=64, num_layers=2)), 'missing keys'),
    (dict(arch=dict(embed_dims=60, num_layers=2, num_heads=4,
                    feedforward_channels=8)), 'divisible by 4 \\* num_heads'),
    (dict(arch='sapiens2_tiny', layer_cfgs=[{}]), 'one dict per block'),
    (dict(arch='sapiens2_tiny', layer_cfgs=[{}, {'heads': 2}]),
     "unknown keys \\['heads'\\]"),
    (dict(arch='sapiens2_tiny', layer_cfgs={'num_kv_heads': 3}),
     'divisor of num_heads'),
    (dict(arch='sapiens2_tiny', out_type='avg'), 'out_type'),
    (dict(arch='sapiens2_tiny', out_indices=[2]), 'out of range'),
    (dict(arch='sapiens2_tiny', rope_dtype='fp16'), 'rope_dtype'),
    (dict(arch='sapiens2_1b_4k', use_tokenizer=False), "'sapiens2_1b'"),
])
def test_bad_arguments_say_what_to_do(kwargs, match):
    with torch.device('meta'), pytest.raises(ValueError, match=match):
        Sapiens2VisionTransformer(**kwargs)


def test_input_size_must_be_a_multiple_of_the_patch():
    model = Sapiens2VisionTransformer('sapiens2_tiny').eval()
    with pytest.raises(ValueError, match='multiples of 16'):
        model(torch.randn(1, 3, 40, 32))
    tok = Sapiens2VisionTransformer('sapiens2_tiny', use_tokenizer=True)
    with pytest.raises(ValueError, match='multiples of 64'):
        tok(torch.randn(1, 3, 64, 48))


def test_gqa_rule():
    # 0.4b: 24 blocks, 16 heads; blocks 8..15 have 8 K/V heads.
    with torch.device('meta'):
        m = Sapiens2VisionTransformer('sapiens2_0.4b')
    kv = [b.attn.num_kv_heads for b in m.blocks]
    assert kv == [16] * 8 + [8] * 8 + [16] * 8
    with torch.device('meta'):
        m = Sapiens2VisionTransformer(
            'sapiens2_tiny', layer_cfgs=[{}, {'num_kv_heads': 1}])
    assert [b.attn.num_kv_heads for b in m.blocks] == [4, 1]
    assert m.blocks[1].attn.wk.weight.shape == (16, 64)


# ------------------------------------------------------------------ RoPE
def test_rope_periods_bf16_values_from_the_facts():
    periods = RopePositionEmbedding(64).periods
    assert periods.dtype == torch.bfloat16 and periods.shape == (16, )
    # The fact sheet lists [1, 1.3359, 1.7812, ..., 75.0] for head dim 64.
    assert periods[:3].tolist() == [1.0, 1.3359375, 1.78125]
    assert periods[-1].item() == 75.0
    # They are 100 ** (k / 16) rounded to bf16 (8 significant bits).
    exact = torch.tensor([100**(k / 16) for k in range(16)],
                         dtype=torch.float64)
    assert ((periods.double() - exact).abs() / exact).max() < 2**-8


def test_rope_rotation_against_hand_computation():
    hd, H, W = 8, 3, 5
    rope = RopePositionEmbedding(hd, rope_dtype='fp32')
    sin, cos = rope(H, W)
    periods = [100**(2 * k / (hd // 2)) for k in range(hd // 4)]
    x = torch.randn(1, 1, 9 + H * W, hd)  # 9 prefix tokens
    q, k = apply_rope(x, x.clone(), (sin, cos))
    torch.testing.assert_close(q, k)
    assert torch.equal(q[..., :9, :], x[..., :9, :])  # prefix untouched
    for i, j in [(0, 0), (1, 3), (2, 4)]:
        n = i * W + j
        cy, cx = 2 * (i + 0.5) / H - 1, 2 * (j + 0.5) / W - 1
        # dims (m, m + hd/2) rotate by 2 pi c / period, with c = cy for the
        # first hd/4 pairs and cx for the next hd/4.
        angles = [2 * math.pi * cy / p for p in periods] + \
            [2 * math.pi * cx / p for p in periods]
        v = x[0, 0, 9 + n].double()
        want = v.clone()
        for m, a in enumerate(angles):
            c, s = math.cos(a), math.sin(a)
            x1, x2 = v[m].item(), v[m + hd // 2].item()
            want[m] = x1 * c - x2 * s
            want[m + hd // 2] = x2 * c + x1 * s
        # fp32 trig of angles up to ~6.3: a few fp32 ulps.
        torch.testing.assert_close(q[0, 0, 9 + n].double(), want,
                                   rtol=0, atol=1e-5)


def test_rope_bf16_runs_in_bf16_also_in_fp32_models():
    rope = RopePositionEmbedding(16)
    sin, cos = rope(4, 3)
    assert sin.dtype == cos.dtype == torch.bfloat16
    q = torch.randn(2, 4, 9 + 12, 16)
    rq, _ = apply_rope(q, q, (sin, cos))
    assert rq.dtype == torch.float32
    # The prefix tokens too went through bf16 (and back).
    torch.testing.assert_close(rq[:, :, :9],
                               q[:, :, :9].bfloat16().float(), rtol=0, atol=0)
    assert not torch.equal(rq[:, :, :9], q[:, :, :9])
    # The buffer stays bf16 through load_state_dict and .to(device).
    rope.load_state_dict({'periods': torch.ones(4)})
    assert rope.to('cpu').periods.dtype == torch.bfloat16


def _native_bf16_rope(periods, H, W, x):
    """The official computation, op by op in bf16 tensors."""
    bf = torch.bfloat16
    cy = torch.arange(0.5, H, dtype=bf) / H
    cx = torch.arange(0.5, W, dtype=bf) / W
    c = torch.stack(torch.meshgrid(cy, cx, indexing='ij'), -1).flatten(0, 1)
    a = 2 * math.pi * (2.0 * c - 1.0)[:, :, None] / periods[None, None, :]
    a = a.flatten(1, 2).tile(2)
    sin, cos = torch.sin(a), torch.cos(a)
    y = x.to(bf)
    p = x.shape[-2] - H * W
    t = y[..., p:, :]
    t1, t2 = t.chunk(2, -1)
    t = t * cos + torch.cat((-t2, t1), -1) * sin
    return sin, cos, torch.cat((y[..., :p, :], t), -2).to(x.dtype)


@pytest.mark.parametrize('hd, grid', [
    (64, (64, 48)), (80, (64, 48)), (76, (64, 48)),  # 0.4b/1b, 0.8b, 5b
    (64, (3, 5)), (64, (136, 3)),  # > 129 rows: bf16 arange's own rounding
])
def test_rope_float_route_has_the_bits_of_bf16_ops(hd, grid):
    # The module computes "in bf16" as float32 ops each rounded to bf16 (so
    # that it exports to float-only runtimes); that must be bit-exact.
    rope = RopePositionEmbedding(hd)
    sin, cos = rope(*grid)
    x = torch.randn(1, 2, 9 + grid[0] * grid[1], hd) * 3
    for q in (x, x.bfloat16()):
        s0, c0, want = _native_bf16_rope(rope.periods, *grid, q)
        assert torch.equal(sin, s0) and torch.equal(cos, c0)
        assert torch.equal(apply_rope(q, q, (sin, cos))[0], want)


def _two_block_model(rope_dtype, device=None):
    torch.manual_seed(0)
    # Head dim 64 as in 0.4b / 1b, 2 blocks, LayerScale 1 (a trained
    # attention branch matters; the 1e-4 init value would hide it). The
    # relative difference is ~1.4e-3 here (~2e-3 at 0.4b's width).
    arch = dict(embed_dims=512, num_layers=2, num_heads=8,
                feedforward_channels=2048)
    with torch.device(device or 'cpu'):
        return Sapiens2VisionTransformer(
            arch, rope_dtype=rope_dtype,
            layer_cfgs={'layer_scale_init_value': 1.0}).eval()


@pytest.mark.slow
def test_bf16_vs_fp32_rope_differ_by_about_1e3_after_two_blocks():
    bf16 = _two_block_model('bf16')
    fp32 = _two_block_model('fp32', 'meta').to_empty(device='cpu')
    fp32.load_state_dict(bf16.state_dict())
    assert fp32.rope_embed.periods.dtype == torch.float32
    x = torch.randn(1, 3, 256, 192)
    with torch.no_grad():
        a, b = bf16(x)[0], fp32(x)[0]
    rel = ((a - b).norm() / b.norm()).item()
    # The fact sheet: "fp32 RoPE changes the output by about 1e-3 relative
    # after only 2 blocks"; "about" read as within a factor 3.
    assert 3e-4 < rel < 3e-3, rel


# ------------------------------------------------------------------- GQA
def test_gqa_block_equals_block_with_kv_explicitly_repeated():
    torch.manual_seed(0)
    gqa = GroupedQueryAttention(64, num_heads=4, num_kv_heads=2,
                                layer_scale_init_value=1.0)
    mha = GroupedQueryAttention(64, num_heads=4, num_kv_heads=4,
                                layer_scale_init_value=1.0)
    with torch.no_grad():  # non-trivial norms, biases and LayerScale
        for p in gqa.parameters():
            if p.dim() == 1:
                p.normal_(std=0.3)
    hd = 16
    state = gqa.state_dict()
    for name in ('wk', 'wv'):
        # K/V head g serves query heads 2g and 2g + 1: repeat each head's
        # rows twice, in place.
        w = state[f'{name}.weight'].reshape(2, hd, 64)
        b = state[f'{name}.bias'].reshape(2, hd)
        state[f'{name}.weight'] = w.repeat_interleave(2, 0).reshape(64, 64)
        state[f'{name}.bias'] = b.repeat_interleave(2, 0).reshape(64)
    mha.load_state_dict(state)
    x = torch.randn(2, 9 + 12, 64)
    rope = RopePositionEmbedding(hd, rope_dtype='fp32')(4, 3)
    with torch.no_grad():
        # One head grouping per implementation; the same math otherwise.
        torch.testing.assert_close(gqa(x, rope), mha(x, rope), rtol=1e-5,
                                   atol=1e-6)
        # The mapping is h -> h // 2: a tiled K/V (h -> h % 2) differs.
        state_tiled = dict(state)
        for name in ('wk', 'wv'):
            w = gqa.state_dict()[f'{name}.weight'].reshape(2, hd, 64)
            state_tiled[f'{name}.weight'] = w.repeat(2, 1, 1).reshape(64, 64)
        mha.load_state_dict(state_tiled)
        assert not torch.allclose(gqa(x, rope), mha(x, rope), atol=1e-3)


# ------------------------------------------------------- whole backbone
def _tiny(**kwargs):
    torch.manual_seed(0)
    model = Sapiens2VisionTransformer(
        'sapiens2_tiny', layer_cfgs=[{}, {'num_kv_heads': 2}], **kwargs)
    with torch.no_grad():  # trained-like scales, not the 1e-4 LayerScale
        for b in model.blocks:
            b.attn.gamma.weight.uniform_(0.5, 1.5)
        for name, p in model.named_parameters():
            if name.endswith('norm.weight') or '.ln' in name:
                p.uniform_(0.5, 1.5)
    return model.eval()


@pytest.mark.parametrize('rope_dtype', ['fp32', 'bf16'])
@pytest.mark.parametrize('out_type', ['raw', 'featmap', 'cls_token'])
def test_forward_matches_plain_reference(rope_dtype, out_type):
    model = _tiny(rope_dtype=rope_dtype, out_type=out_type,
                  out_indices=[0, 1])
    x = torch.randn(2, 3, 64, 48)
    with torch.no_grad():
        outs = model(x)
        refs = sapiens2_reference_forward(
            model.state_dict(), x, num_heads=4, rope_dtype=rope_dtype,
            out_type=out_type, out_indices=[0, 1])
    shapes = dict(raw=(2, 9 + 12, 64), featmap=(2, 64, 4, 3),
                  cls_token=(2, 64))
    assert len(outs) == 2 and outs[1].shape == shapes[out_type]
    for out, ref in zip(outs, refs):
        # fp32 RoPE: float rounding of two implementations only. bf16
        # RoPE: an fp32 ulp of difference in q or k can flip its bf16
        # rounding (2**-9 relative on that element).
        tol = 1e-5 if rope_dtype == 'fp32' else 1e-3
        torch.testing.assert_close(out, ref, rtol=tol, atol=tol)


def test_tokenizer_matches_plain_reference():
    model = _tiny(use_tokenizer=True, out_type='featmap',
                  rope_dtype='fp32')
    with torch.no_grad():
        model.tokenizer.local_pos_embed.normal_()
    x = torch.randn(1, 3, 128, 64)  # 8x4 patches -> 2x1 window tokens
    with torch.no_grad():
        out = model(x)[0]
        ref = sapiens2_reference_forward(
            model.state_dict(), x, num_heads=4, rope_dtype='fp32',
            out_type='featmap')[0]
    assert out.shape == (1, 64, 2, 1)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


def test_any_resolution_without_interpolation():
    model = _tiny(out_type='featmap')
    with torch.no_grad():
        assert model(torch.randn(1, 3, 32, 80))[0].shape == (1, 64, 2, 5)


def test_every_parameter_gets_a_gradient_and_checkpointing_matches():
    model = _tiny(out_type='featmap', use_tokenizer=True).train()
    cp_model = _tiny(out_type='featmap', use_tokenizer=True, with_cp=True)
    cp_model.load_state_dict(model.state_dict())
    cp_model.train()
    x = torch.randn(2, 3, 64, 128)
    model(x)[0].square().mean().backward()
    cp_model(x)[0].square().mean().backward()
    for (name, p), q in zip(model.named_parameters(), cp_model.parameters()):
        assert p.grad is not None and p.grad.abs().sum() > 0, name
        assert torch.isfinite(p.grad).all(), name
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-7)


def test_frozen_stages_and_drop_path():
    model = Sapiens2VisionTransformer('sapiens2_tiny', frozen_stages=1,
                                      drop_path_rate=0.2).train()
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    assert {'cls_token', 'storage_tokens',
            'patch_embed.projection.weight'} <= frozen
    assert all(n in frozen for n, _ in model.blocks[0].named_parameters(
        prefix='blocks.0'))
    assert not any(n.startswith('blocks.1.') for n in frozen)
    assert model.blocks[1].drop_path.drop_prob == pytest.approx(0.2)
    assert isinstance(model.blocks[0].drop_path, torch.nn.Identity)
    assert all(p.requires_grad for p in Sapiens2VisionTransformer(
        'sapiens2_tiny', frozen_stages=0).train().parameters())
    # Stochastic depth is on in training and off in eval.
    x = torch.randn(8, 3, 32, 32)
    torch.manual_seed(1)
    a = model(x)[0]
    torch.manual_seed(2)
    b = model(x)[0]
    assert not torch.equal(a, b)
    model.eval()
    assert torch.equal(model(x)[0], model(x)[0])


def test_sdpa_is_what_the_blocks_call(monkeypatch):
    model = _tiny()
    calls = []
    for b in model.blocks:
        fn = b.attn.scaled_dot_product_attention
        assert fn is sdpa.scaled_dot_product_attention

        def spy(*a, fn=fn, **k):
            calls.append(k.get('enable_gqa'))
            return fn(*a, **k)
        b.attn.scaled_dot_product_attention = spy
    with torch.no_grad():
        model(torch.randn(1, 3, 32, 32))
    assert calls == [False, True]
