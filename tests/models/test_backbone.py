import pytest
import torch
import torch.nn.functional as F

from sapiens_mm.checkpoint import load_backbone_checkpoint
from sapiens_mm.models import SapiensVisionTransformer

# (embed_dims, num_layers, feedforward) and fine-tune encoder size in
# billions, from the official arch table and parameter counts.
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
