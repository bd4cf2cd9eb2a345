"""Depth / normal heads: shapes, official key layout, strict loading."""
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.structures import PixelData
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample

from sapiens_mm.checkpoint import load_checkpoint
from sapiens_mm.models import SapiensVisionTransformer

ROOT = Path(__file__).resolve().parents[2]
EMBED = {'0.3b': 1024, '0.6b': 1280, '1b': 1536, '2b': 1920}
# Head parameter counts of the official models, millions (facts sheet §10).
HEAD_MPARAMS = {
    'depth': {'0.3b': 13.7, '0.6b': 15.2, '1b': 16.8, '2b': 19.2},
    'normal': {'0.3b': 33.2, '0.6b': 36.4, '1b': 39.5, '2b': 44.2},
}


def official_head_shapes(task, C):
    """Key -> shape of decode_head in an official checkpoint, by hand."""
    ch, n_deconv, n_conv, out = ((384, 4, 2, 1) if task == 'depth' else
                                 (768, 3, 3, 3))
    shapes = {}
    for i in range(n_deconv):
        shapes[f'deconv_layers.{3 * i}.weight'] = (C if i == 0 else ch, ch,
                                                   4, 4)
    for i in range(n_conv):
        shapes[f'conv_layers.{3 * i}.weight'] = (ch, ch, 1, 1)
        shapes[f'conv_layers.{3 * i}.bias'] = (ch, )
    shapes['conv_seg.weight'] = (out, ch, 1, 1)
    shapes['conv_seg.bias'] = (out, )
    return shapes


@pytest.mark.parametrize('task,scale', [('depth', 16), ('normal', 8)])
def test_head_output_shape(task, scale):
    head = MODELS.build(dict(
        type=f'Sapiens{task.capitalize()}Head', in_channels=32, channels=8,
        deconv_out_channels=(8, ) * (4 if task == 'depth' else 3),
        conv_out_channels=(8, ) * (2 if task == 'depth' else 3)))
    head.init_weights()
    out = head((torch.randn(2, 32, 4, 3), ))
    assert out.shape == (2, 1 if task == 'depth' else 3, 4 * scale,
                         3 * scale)


@pytest.mark.parametrize('task', ['depth', 'normal'])
@pytest.mark.parametrize('size', ['0.3b', '0.6b', '1b', '2b'])
def test_config_heads_have_official_layout_and_size(task, size):
    cfg = Config.fromfile(str(
        ROOT / f'configs/{task}/sapiens_{size}-200e_{task}_folder-1024x768.py'))
    with torch.device('meta'):
        head = MODELS.build(cfg.model.decode_head)
    shapes = {k: tuple(v.shape) for k, v in head.state_dict().items()}
    assert shapes == official_head_shapes(task, EMBED[size])
    n = sum(p.numel() for p in head.parameters()) / 1e6
    assert round(n, 1) == HEAD_MPARAMS[task][size]


def test_head_rejects_inconsistent_arguments():
    with pytest.raises(ValueError, match='channels=64 must equal'):
        MODELS.build(dict(type='SapiensDepthHead', in_channels=8,
                          channels=64))
    with pytest.raises(TypeError, match='regression head'):
        MODELS.build(dict(type='SapiensDepthHead', in_channels=8,
                          num_classes=1))
    with pytest.raises(ValueError, match='3 channels'):
        MODELS.build(dict(type='SapiensNormalHead', in_channels=8,
                          out_channels=1))


def test_head_loss_needs_target():
    head = MODELS.build(dict(type='SapiensDepthHead', in_channels=8,
                             channels=4, deconv_out_channels=(4, ),
                             conv_out_channels=(4, )))
    with pytest.raises(KeyError, match='gt_depth_map'):
        head.loss((torch.randn(1, 8, 2, 2), ), [SegDataSample()], {})
    sample = SegDataSample()
    sample.gt_depth_map = PixelData(data=torch.rand(1, 8, 8) + 0.1)
    losses = head.loss((torch.randn(1, 8, 2, 2), ), [sample], {})
    assert set(losses) == {'loss_silog'} and torch.isfinite(
        losses['loss_silog'])


@pytest.mark.slow
@pytest.mark.parametrize('task', ['depth', 'normal'])
def test_official_checkpoint_layout_loads_strictly(task, tmp_path):
    """A state dict named and shaped like sapiens_*_render_people_*.pth
    (backbone + decode_head, official channels) loads with strict=True."""
    init_default_scope('mmseg')
    model = MODELS.build(dict(
        type='SapiensDenseEstimator', task=task,
        backbone=dict(type='mmpretrain.SapiensVisionTransformer',
                      arch='sapiens_tiny', img_size=(32, 32)),
        decode_head=dict(type=f'Sapiens{task.capitalize()}Head',
                         in_channels=64)))
    backbone = SapiensVisionTransformer(arch='sapiens_tiny', img_size=(32, 32))
    state = {f'backbone.{k}': torch.randn_like(v)
             for k, v in backbone.state_dict().items()}
    state.update({f'decode_head.{k}': torch.randn(shape)
                  for k, shape in official_head_shapes(task, 64).items()})
    path = tmp_path / f'sapiens_tiny_{task}.pth'
    torch.save({'state_dict': state, 'meta': {'epoch': 100}}, path)
    load_checkpoint(model, str(path), strict=True)
    own = model.state_dict()
    for k, v in state.items():
        assert torch.equal(own[k], v), k
    # a checkpoint of another layout is refused under strict loading
    state['decode_head.final_layer.weight'] = state.pop(
        'decode_head.conv_seg.weight')
    torch.save({'state_dict': state}, path)
    with pytest.raises(Exception, match='conv_seg|final_layer'):
        load_checkpoint(model, str(path), strict=True)
