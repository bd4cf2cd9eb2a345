"""Depth / normal heads: shapes, official key layout, strict loading.

Sapiens2 heads: official key layout of every released size (from the
shipped configs), shapes, building blocks against hand computations.
"""
import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.registry import DefaultScope, init_default_scope
from mmengine.structures import PixelData
from mmpose.registry import MODELS as POSE_MODELS
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample

from sapiens_mm.checkpoint import load_checkpoint
from sapiens_mm.models import SapiensVisionTransformer
from sapiens_mm.models.heads import RMSNorm2d, make_conv_stack, make_pixel_shuffle_stack

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


# decode_head key -> shape of the official task checkpoints, generated from
# the official modules built on the meta device (see the file's `source`).
OFFICIAL = json.loads(
    (ROOT / 'tests/data/sapiens2_head_keys.json').read_text())['heads']
SIZES = ('0.4b', '0.8b', '1b', '5b')
LEAF = {
    'pose': 'pose/sapiens2_{}-goliath-1024x768.py',
    'seg': 'seg/sapiens2_{}-dome29-1024x768.py',
    'normal': 'normal/sapiens2_{}-normal_folder-1024x768.py',
    'pointmap': 'pointmap/sapiens2_{}-pointmap_folder-1024x768.py',
    'albedo': 'albedo/sapiens2_{}-albedo_folder-1024x768.py',
}


def head_cfg(task, size):
    cfg = Config.fromfile(
        str(ROOT / 'configs/sapiens2' / LEAF[task].format(size)))
    return cfg.model.head if task == 'pose' else cfg.model.decode_head


@pytest.mark.parametrize('task', sorted(LEAF))
@pytest.mark.parametrize('size', SIZES)
def test_config_head_matches_official_keys_and_shapes(task, size):
    registry = POSE_MODELS if task == 'pose' else MODELS
    # the registry's own scope, whatever default scope an earlier test set
    with torch.device('meta'), DefaultScope.overwrite_default_scope(
            'mmpose' if task == 'pose' else 'mmseg'):
        head = registry.build(head_cfg(task, size))
    shapes = {k: list(v.shape) for k, v in head.state_dict().items()}
    assert shapes == OFFICIAL[f'sapiens2_{size}'][task]


def test_forward_shapes():
    feats = (torch.randn(2, 32, 4, 3), )
    with DefaultScope.overwrite_default_scope('mmpose'):
        pose = POSE_MODELS.build(dict(
            type='Sapiens2HeatmapHead', in_channels=32, out_channels=5,
            deconv_out_channels=(8, 8), conv_out_channels=(8, 8, 4)))
    assert pose(feats).shape == (2, 5, 16, 12)
    for typ in ('Sapiens2NormalHead', 'Sapiens2AlbedoHead'):
        head = MODELS.build(dict(type=typ, in_channels=32,
                                 upsample_channels=(8, 8, 4, 4),
                                 conv_out_channels=(4, 4, 4)))
        assert head(feats).shape == (2, 3, 64, 48)
    pm = MODELS.build(dict(
        type='Sapiens2PointmapHead', in_channels=32,
        upsample_channels=(8, 8, 4, 4), conv_out_channels=(4, 4, 4),
        scale_conv_channels=(8, 8, 4), scale_hidden_channels=(8, 4),
        featmap_size=(16, 12)))
    points, scale = pm((torch.randn(2, 32, 16, 12), ))
    assert points.shape == (2, 3, 256, 192) and scale.shape == (2, 1)
    # 16x12 -> 8x6 -> 4x3 -> 2x2 in the scale branch: Linear of 4 * 2 * 2
    assert pm.scale_final_layer[1].in_features == 16


def test_pointmap_head_refuses_other_feature_sizes():
    pm = MODELS.build(dict(
        type='Sapiens2PointmapHead', in_channels=8,
        upsample_channels=(4, 4), conv_out_channels=(4, ),
        scale_conv_channels=(4, 4, 4), scale_hidden_channels=(4, ),
        featmap_size=(16, 12)))
    with pytest.raises(ValueError, match='built for a'):
        pm((torch.randn(1, 8, 8, 6), ))
    with pytest.raises(ValueError, match='InstanceNorm needs more'):
        MODELS.build(dict(type='Sapiens2PointmapHead', in_channels=8,
                          featmap_size=(8, 6)))


def test_pointmap_metric_output_divides_by_scale():
    pm = MODELS.build(dict(
        type='Sapiens2PointmapHead', in_channels=8,
        upsample_channels=(4, ), conv_out_channels=(4, ),
        scale_conv_channels=(4, 4, 4), scale_hidden_channels=(4, ),
        featmap_size=(16, 12)))
    points = torch.randn(2, 3, 5, 4)
    scale = torch.tensor([[0.5], [-1.0]])
    out = pm.metric_pointmap(points, scale)
    assert torch.allclose(out[0], points[0] / 0.5)
    # a non-positive scale is clamped (no sign flip, no division by 0)
    assert torch.allclose(out[1], points[1] / 1e-6)


def test_dense_head_rejects_decode_head_options():
    with pytest.raises(TypeError, match='no `num_classes`'):
        MODELS.build(dict(type='Sapiens2NormalHead', in_channels=8,
                          num_classes=3))
    with pytest.raises(ValueError, match='3 channels'):
        MODELS.build(dict(type='Sapiens2AlbedoHead', in_channels=8,
                          out_channels=4))


def test_rms_norm_2d_against_hand_computation():
    norm = RMSNorm2d(4)
    with torch.no_grad():
        norm.norm.weight.copy_(torch.tensor([1.0, 2.0, 0.5, -1.0]))
    x = torch.randn(2, 4, 3, 5)
    rms = (x.pow(2).mean(dim=1, keepdim=True) + 1e-6).sqrt()
    expected = x / rms * norm.norm.weight.view(1, 4, 1, 1)
    assert torch.allclose(norm(x), expected, atol=1e-6)
    assert set(norm.state_dict()) == {'norm.weight'}


def test_pixel_shuffle_block_against_functional_ops():
    blocks = make_pixel_shuffle_stack(6, (4, 2), norm='rms')
    assert set(blocks.state_dict()) == {
        '0.0.weight', '0.0.bias', '0.2.norm.weight', '1.0.weight',
        '1.0.bias', '1.2.norm.weight'}
    x = torch.randn(1, 6, 3, 2)
    conv = blocks[0][0]
    y = F.pixel_shuffle(F.conv2d(x, conv.weight, conv.bias, padding=1), 2)
    y = F.silu(y / (y.pow(2).mean(1, keepdim=True) + 1e-6).sqrt())
    assert torch.allclose(blocks[0](x), y, atol=1e-6)
    assert blocks[1](blocks[0](x)).shape == (1, 2, 12, 8)


def test_strided_conv_stack_halves_with_ceil():
    stack = make_conv_stack(4, (4, 4), (1, 1), stride=2)
    assert stack(torch.randn(1, 4, 7, 6)).shape == (1, 4, 2, 2)
