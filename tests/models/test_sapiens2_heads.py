"""Sapiens2 heads: official key layout of every released size (from the
shipped configs), shapes, building blocks against hand computations."""
import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.registry import DefaultScope
from mmpose.registry import MODELS as POSE_MODELS
from mmseg.registry import MODELS

from sapiens_mm.models.heads import (RMSNorm2d, make_conv_stack,
                                     make_pixel_shuffle_stack)

ROOT = Path(__file__).resolve().parents[2]
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
