"""SapiensHeatmapHead: layout, shapes, init and official checkpoint loading."""
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn
from mmengine.config import Config
from mmengine.registry import DefaultScope
from mmengine.structures import InstanceData, PixelData
from mmpose.registry import MODELS
from mmpose.structures import PoseDataSample

from sapiens_mm.checkpoint import load_checkpoint
from sapiens_mm.datasets import goliath_metainfo
from sapiens_mm.models import SapiensHeatmapHead

CFG = str(Path(__file__).resolve().parents[2] / 'configs' / 'pose' / 'goliath'
          / 'sapiens_0.3b-210e_goliath-1024x768.py')


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny tensors: one thread avoids OpenMP barrier waits on a busy CPU."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _mmpose_scope():
    """Build configs in the mmpose scope, as the Runner does."""
    with DefaultScope.overwrite_default_scope('mmpose'):
        yield


def small_head(**kw):
    cfg = dict(type='SapiensHeatmapHead', in_channels=64, out_channels=17,
               deconv_out_channels=(32, 32), conv_out_channels=(16, 16))
    cfg.update(kw)
    return MODELS.build(cfg)


def test_head_output_shape_and_blocks():
    head = small_head()
    out = head((torch.randn(2, 64, 16, 12), ))
    assert out.shape == (2, 17, 64, 48)  # x4, one heatmap per keypoint
    d, c = head.deconv_layers, head.conv_layers
    for seq in (d, c):
        assert isinstance(seq[1], nn.InstanceNorm2d) and not seq[1].affine
        assert isinstance(seq[2], nn.SiLU)
    assert isinstance(d[0], nn.ConvTranspose2d) and d[0].bias is None
    assert d[0].kernel_size == (4, 4) and d[0].stride == (2, 2)
    assert isinstance(c[0], nn.Conv2d) and c[0].kernel_size == (1, 1)
    assert c[0].bias is not None
    assert head.final_layer.kernel_size == (1, 1)


def test_official_sizes_keys_and_parameter_count():
    """0.3b / 308 keypoints: the exact keys and shapes of the released
    Goliath checkpoints' head and its 23.4 M parameters."""
    head = SapiensHeatmapHead(in_channels=1024, out_channels=308)
    shapes = {k: tuple(v.shape) for k, v in head.state_dict().items()}
    assert shapes == {
        'deconv_layers.0.weight': (1024, 768, 4, 4),
        'deconv_layers.3.weight': (768, 768, 4, 4),
        'conv_layers.0.weight': (768, 768, 1, 1),
        'conv_layers.0.bias': (768, ),
        'conv_layers.3.weight': (768, 768, 1, 1),
        'conv_layers.3.bias': (768, ),
        'final_layer.weight': (308, 768, 1, 1),
        'final_layer.bias': (308, ),
    }
    n = sum(p.numel() for p in head.parameters())
    assert round(n / 1e6, 1) == 23.4


def test_official_init():
    head = small_head(deconv_out_channels=(128, 128),
                      conv_out_channels=(128, 128))
    head.init_weights()
    w = torch.cat([head.deconv_layers[0].weight.flatten(),
                   head.conv_layers[3].weight.flatten()])
    assert w.std().item() == pytest.approx(0.001, rel=0.05)
    assert head.conv_layers[0].bias.abs().max() == 0
    assert head.final_layer.bias.abs().max() == 0


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(TypeError, match='in_channels'):
        small_head(in_channels=[64, 64])
    with pytest.raises(ValueError, match='kernel'):
        small_head(deconv_kernel_sizes=(4, ))
    with pytest.raises(ValueError, match='kernel size 5'):
        small_head(deconv_kernel_sizes=(5, 5))


def _sample(hm_size=(16, 12)):
    """A 308-keypoint data sample with Goliath flip indices."""
    info = goliath_metainfo()['keypoint_info']
    names = {v['name']: k for k, v in info.items()}
    flip = [names[v['swap']] if v['swap'] else k
            for k, v in sorted(info.items())]
    num_keypoints = len(flip)
    s = PoseDataSample(metainfo=dict(
        flip_indices=flip,
        input_size=(48, 64),
        input_center=np.array([24., 32.]),
        input_scale=np.array([48., 64.])))
    s.gt_fields = PixelData(heatmaps=torch.rand(num_keypoints, *hm_size))
    s.gt_instance_labels = InstanceData(
        keypoint_weights=torch.ones(1, num_keypoints))
    s.gt_instances = InstanceData(bboxes=np.array([[0., 0., 48., 64.]]),
                                  bbox_scores=np.ones(1))
    return s


@pytest.mark.parametrize('loss', [
    dict(type='KeypointMSELoss', use_target_weight=True),
    dict(type='KeypointOHKMMSELoss', use_target_weight=True, topk=128)
])
def test_losses_train(loss):
    head = small_head(out_channels=308, deconv_out_channels=(16, 16),
                      conv_out_channels=(16, 16), loss=loss)
    feats = (torch.randn(2, 64, 4, 3), )
    losses = head.loss(feats, [_sample(), _sample()])
    assert losses['loss_kpt'].ndim == 0 and losses['loss_kpt'] > 0
    losses['loss_kpt'].backward()
    assert all(p.grad is not None for p in head.parameters())


def test_flip_test_uses_metainfo_flip_indices():
    """Flip test averages the heatmaps with the mirrored heatmaps of the
    flipped image, channels swapped by the metainfo's flip indices."""
    codec = dict(type='UDPHeatmap', input_size=(48, 64), heatmap_size=(12, 16),
                 sigma=2)
    head = small_head(out_channels=308, deconv_out_channels=(16, 16),
                      conv_out_channels=(16, 16), decoder=codec)
    x, x_flip = torch.randn(1, 64, 4, 3), torch.randn(1, 64, 4, 3)
    sample = _sample()
    flip = sample.metainfo['flip_indices']
    with torch.no_grad():
        hm = head((x, ))
        hm_flip = head((x_flip, )).flip(-1)[:, flip]
        expected = head.decode((hm + hm_flip) / 2)[0]
        got = head.predict([(x, ), (x_flip, )], [sample],
                           test_cfg=dict(flip_test=True, flip_mode='heatmap',
                                         shift_heatmap=False))[0]
    np.testing.assert_allclose(got.keypoints, expected.keypoints)
    assert got.keypoints.shape == (1, 308, 2)


def official_pose_state_dict(num_layers, dims, ffn, num_keypoints,
                             grid=(4, 3)):
    """A state dict with the key names and shapes of an official Sapiens
    pose checkpoint (mmpretrain ViT backbone + HeatmapHead), written from
    the published layout, not from our model."""
    c = dims
    sd = {
        'backbone.patch_embed.projection.weight': (c, 3, 16, 16),
        'backbone.patch_embed.projection.bias': (c, ),
        'backbone.pos_embed': (1, grid[0] * grid[1], c),
        'backbone.ln1.weight': (c, ),
        'backbone.ln1.bias': (c, ),
        'head.deconv_layers.0.weight': (c, 768, 4, 4),
        'head.deconv_layers.3.weight': (768, 768, 4, 4),
        'head.conv_layers.0.weight': (768, 768, 1, 1),
        'head.conv_layers.0.bias': (768, ),
        'head.conv_layers.3.weight': (768, 768, 1, 1),
        'head.conv_layers.3.bias': (768, ),
        'head.final_layer.weight': (num_keypoints, 768, 1, 1),
        'head.final_layer.bias': (num_keypoints, ),
    }
    for i in range(num_layers):
        p = f'backbone.layers.{i}.'
        sd.update({
            p + 'ln1.weight': (c, ), p + 'ln1.bias': (c, ),
            p + 'attn.qkv.weight': (3 * c, c), p + 'attn.qkv.bias': (3 * c, ),
            p + 'attn.proj.weight': (c, c), p + 'attn.proj.bias': (c, ),
            p + 'ln2.weight': (c, ), p + 'ln2.bias': (c, ),
            p + 'ffn.layers.0.0.weight': (ffn, c),
            p + 'ffn.layers.0.0.bias': (ffn, ),
            p + 'ffn.layers.1.weight': (c, ffn),
            p + 'ffn.layers.1.bias': (c, ),
        })
    g = torch.Generator().manual_seed(0)
    return {k: torch.randn(s, generator=g) * 0.01 for k, s in sd.items()}


@pytest.mark.slow
def test_official_pose_checkpoint_loads_strictly(tmp_path):
    """A checkpoint laid out like sapiens_*_goliath_best_goliath_AP_*.pth
    loads with strict key checking into the config's TopdownPoseEstimator
    (tiny encoder so the test stays small; head at official width)."""
    cfg = Config.fromfile(CFG)
    cfg.model.backbone.update(arch='sapiens_tiny', img_size=(64, 48),
                              init_cfg=None)
    cfg.model.head.in_channels = 64
    model = MODELS.build(cfg.model)
    sd = official_pose_state_dict(2, 64, 128, 308)
    path = tmp_path / 'sapiens_tiny_goliath_best_goliath_AP_000.pth'
    torch.save(dict(state_dict=sd, meta=dict(epoch=1)), path)
    load_checkpoint(model, str(path), strict=True)
    own = model.state_dict()
    assert set(own) == set(sd)
    for k, v in sd.items():
        torch.testing.assert_close(own[k], v)
    # a missing head key is an error, not silently skipped
    del sd['head.final_layer.bias']
    torch.save(dict(state_dict=sd), path)
    with pytest.raises(RuntimeError, match='final_layer.bias'):
        load_checkpoint(model, str(path), strict=True)
