import pytest
import torch.nn as nn
from mmengine.optim import build_optim_wrapper

from sapiens_mm.engine import get_layer_id
from sapiens_mm.models import SapiensVisionTransformer


class Model(nn.Module):

    def __init__(self):
        super().__init__()
        self.backbone = SapiensVisionTransformer(
            arch='sapiens_tiny', img_size=(32, 32), with_cls_token=True,
            out_type='raw')
        self.head = nn.Sequential(nn.Conv2d(64, 8, 1), nn.LayerNorm(8))


def build(rate=0.85, **extra):
    cfg = dict(
        optimizer=dict(type='AdamW', lr=5e-4, betas=(0.9, 0.999),
                       weight_decay=0.1),
        constructor='SapiensLayerDecayOptimWrapperConstructor',
        paramwise_cfg=dict(num_layers=2, layer_decay_rate=rate, **extra))
    model = Model()
    return model, build_optim_wrapper(model, cfg)


def test_layer_ids_follow_official_rules():
    L = 24
    assert get_layer_id('backbone.cls_token', L) == 0
    assert get_layer_id('backbone.pos_embed', L) == 0
    assert get_layer_id('backbone.mask_token', L) == 0
    assert get_layer_id('backbone.patch_embed.projection.weight', L) == 0
    assert get_layer_id('backbone.layers.0.attn.qkv.weight', L) == 1
    assert get_layer_id('backbone.layers.23.ln2.bias', L) == 24
    assert get_layer_id('backbone.ln1.weight', L) == 25
    assert get_layer_id('head.final_layer.weight', L) == 25
    assert get_layer_id('decode_head.conv_seg.weight', L) == 25
    assert get_layer_id('_fsdp_wrapped_module.backbone.layers.3.x', L) == 4


def test_group_lrs_and_weight_decay_equal_the_formula():
    model, wrapper = build(rate=0.85)
    L, r, lr = 2, 0.85, 5e-4
    seen = set()
    for group in wrapper.optimizer.param_groups:
        for name in group['param_names']:
            seen.add(name)
            layer_id = get_layer_id(name, L)
            assert group['lr'] == pytest.approx(lr * r**(L + 1 - layer_id))
            param = dict(model.named_parameters())[name]
            no_decay = (param.ndim == 1 or name.endswith('.bias')
                        or 'pos_embed' in name)
            assert group['weight_decay'] == (0.0 if no_decay else 0.1), name
    assert seen == {n for n, _ in model.named_parameters()}
    lrs = {n: g['lr'] for g in wrapper.optimizer.param_groups
           for n in g['param_names']}
    assert lrs['head.0.weight'] == pytest.approx(5e-4)
    assert lrs['backbone.patch_embed.projection.weight'] == pytest.approx(
        5e-4 * 0.85**3)
    assert lrs['backbone.layers.1.attn.qkv.weight'] == pytest.approx(
        5e-4 * 0.85)


def test_num_layers_read_from_backbone_and_bad_cfg():
    cfg = dict(optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.1),
               constructor='SapiensLayerDecayOptimWrapperConstructor',
               paramwise_cfg=dict(layer_decay_rate=0.5))
    wrapper = build_optim_wrapper(Model(), cfg)
    lrs = {n: g['lr'] for g in wrapper.optimizer.param_groups
           for n in g['param_names']}
    assert lrs['backbone.pos_embed'] == pytest.approx(1e-3 * 0.5**3)
    with pytest.raises(ValueError, match='layer_decay_rate'):
        build_optim_wrapper(Model(), dict(
            optimizer=dict(type='AdamW', lr=1e-3),
            constructor='SapiensLayerDecayOptimWrapperConstructor',
            paramwise_cfg=dict(num_layers=2)))
    with pytest.raises(ValueError, match='custom_keys'):
        build(custom_keys={'head': dict(lr_mult=1.0)})
