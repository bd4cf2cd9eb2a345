"""SapiensSegHead: official layout, shapes, loss, strict checkpoint loading."""
from collections import OrderedDict
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.structures import PixelData
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample

from sapiens_mm.checkpoint import load_checkpoint
from sapiens_mm.models.heads import SapiensSegHead

# Official class weights (sapiens_facts.md section 4), typed in independently
# of the package JSON.
GOLIATH_WEIGHTS = [
    0.1, 10, 3, 2, 4, 4, 2, 2, 6, 10, 3, 3, 1, 4, 4, 2, 2, 6, 10, 3, 3, 1, 1,
    10, 10, 10, 10, 10
]
LIP_WEIGHTS = [
    0.1, 1.5, 1.0, 1.5, 1.5, 0.8, 1.2, 1.0, 1.5, 0.8, 1.2, 1.5, 1.5, 0.7,
    1.0, 1.0, 1.0, 1.0, 1.5, 1.5
]
CFG_DIR = Path(__file__).resolve().parents[2] / 'configs' / 'seg' / 'goliath'
TINY_CFG = str(CFG_DIR / 'sapiens_tiny-200e_goliath-256x192.py')
CFG_03B = str(CFG_DIR / 'sapiens_0.3b-200e_goliath-1024x768.py')


def _head(**kwargs):
    cfg = dict(type='SapiensSegHead', in_channels=16, channels=8,
               num_classes=28, deconv_out_channels=(8, 8, 8),
               conv_out_channels=(8, 8, 8),
               loss_decode=dict(type='CrossEntropyLoss', reduction='none',
                                class_weight='goliath_28'))
    cfg.update(kwargs)
    return MODELS.build(cfg)


def _samples(labels):
    out = []
    for label in labels:
        s = SegDataSample()
        s.gt_sem_seg = PixelData(data=label[None])
        s.set_metainfo(dict(img_shape=tuple(label.shape),
                            ori_shape=tuple(label.shape)))
        out.append(s)
    return out


def test_official_head_layout_shapes_and_size():
    """The 0.3b config's head has the official keys, shapes and size and
    maps a 1/16 feature map to 1/2-resolution logits."""
    cfg = Config.fromfile(CFG_03B)
    head = MODELS.build(cfg.model.decode_head)
    assert isinstance(head, SapiensSegHead)
    shapes = {k: tuple(v.shape) for k, v in head.state_dict().items()}
    assert shapes == {
        'deconv_layers.0.weight': (1024, 768, 4, 4),
        'deconv_layers.3.weight': (768, 768, 4, 4),
        'deconv_layers.6.weight': (768, 768, 4, 4),
        'conv_layers.0.weight': (768, 768, 1, 1),
        'conv_layers.0.bias': (768, ),
        'conv_layers.3.weight': (768, 768, 1, 1),
        'conv_layers.3.bias': (768, ),
        'conv_layers.6.weight': (768, 768, 1, 1),
        'conv_layers.6.bias': (768, ),
        'conv_seg.weight': (28, 768, 1, 1),
        'conv_seg.bias': (28, ),
    }
    n_params = sum(p.numel() for p in head.parameters())
    assert abs(n_params / 1e6 - 33.3) < 0.1  # facts section 10: 33.3 M
    for i in (1, 4, 7):  # InstanceNorm2d without affine, then SiLU
        assert isinstance(head.deconv_layers[i], nn.InstanceNorm2d)
        assert not head.deconv_layers[i].affine
        assert isinstance(head.conv_layers[i + 1], nn.SiLU)
    assert isinstance(head.dropout, nn.Dropout2d) and head.dropout.p == 0.1
    assert head.loss_decode.class_weight == GOLIATH_WEIGHTS
    head.eval()
    with torch.no_grad():
        # a 1024x768 input gives a 64x48 feature map and 512x384 logits;
        # checked here on a 4x3 map to stay fast: x8 upsampling.
        out = head((torch.randn(1, 1024, 4, 3), ))
    assert out.shape == (1, 28, 32, 24)


def test_head_general_options_and_errors():
    head = _head(num_classes=3, deconv_out_channels=(8, ),
                 deconv_kernel_sizes=(4, ), conv_out_channels=(),
                 conv_kernel_sizes=(),
                 loss_decode=dict(type='CrossEntropyLoss'))
    assert head(torch.randn(2, 16, 5, 4)).shape == (2, 3, 10, 8)
    with pytest.raises(ValueError, match='channels=8 must equal'):
        _head(channels=8, conv_out_channels=(8, 4), conv_kernel_sizes=(1, 1))
    with pytest.raises(ValueError, match='num_classes=20'):
        _head(num_classes=20)  # goliath weights are 28 long


def test_lip_class_weight_resolved():
    head = _head(num_classes=20,
                 loss_decode=dict(type='CrossEntropyLoss',
                                  class_weight='lip_cihp_20'))
    assert head.loss_decode.class_weight == LIP_WEIGHTS


def test_loss_equals_official_weighted_mean():
    """Official: per-pixel weighted CE on logits upsampled (bilinear) to the
    label size, reduction='none', then a plain mean over all pixels."""
    head = _head()
    logits = torch.randn(2, 28, 6, 4)
    labels = torch.randint(0, 28, (2, 12, 8))
    labels[0, :3] = 255  # ignored pixels count as zeros in the mean
    loss = head.loss_by_feat(logits, _samples(labels))
    up = F.interpolate(logits, size=(12, 8), mode='bilinear',
                       align_corners=False)
    logp = up.log_softmax(1)
    valid = labels != 255
    safe = labels.clone()
    safe[~valid] = 0
    nll = -logp.gather(1, safe[:, None])[:, 0]
    w = torch.tensor(GOLIATH_WEIGHTS)[safe]
    expected = (nll * w * valid).sum() / labels.numel()
    assert loss['loss_ce'].dim() == 0
    torch.testing.assert_close(loss['loss_ce'], expected)
    assert 'acc_seg' in loss


def _tiny_model():
    init_default_scope('mmseg')
    cfg = Config.fromfile(TINY_CFG)
    return MODELS.build(cfg.model)


def test_strict_loading_of_official_layout(tmp_path):
    """A state dict laid out like an official seg checkpoint (``backbone.*``
    + ``decode_head.{deconv_layers,conv_layers,conv_seg}``) loads strictly."""
    model = _tiny_model()
    keys = set(model.state_dict())
    head_keys = {k for k in keys if not k.startswith('backbone.')}
    assert head_keys == {
        'decode_head.deconv_layers.0.weight',
        'decode_head.deconv_layers.3.weight',
        'decode_head.deconv_layers.6.weight',
        'decode_head.conv_layers.0.weight', 'decode_head.conv_layers.0.bias',
        'decode_head.conv_layers.3.weight', 'decode_head.conv_layers.3.bias',
        'decode_head.conv_layers.6.weight', 'decode_head.conv_layers.6.bias',
        'decode_head.conv_seg.weight', 'decode_head.conv_seg.bias'
    }
    assert {'backbone.patch_embed.projection.weight', 'backbone.pos_embed',
            'backbone.layers.1.ffn.layers.0.0.weight',
            'backbone.ln1.weight'} <= keys
    official = OrderedDict(
        (k, torch.randn_like(v) if v.is_floating_point() else v)
        for k, v in model.state_dict().items())
    path = tmp_path / 'sapiens_tiny_goliath_seg.pth'
    torch.save({'meta': {'epoch': 194}, 'state_dict': official}, path)

    fresh = _tiny_model()
    load_checkpoint(fresh, str(path), strict=True)
    for k, v in fresh.state_dict().items():
        assert torch.equal(v, official[k]), k

    official['decode_head.final_layer.weight'] = torch.zeros(1)
    torch.save({'state_dict': official}, path)
    with pytest.raises(RuntimeError, match='final_layer'):
        load_checkpoint(_tiny_model(), str(path), strict=True)


def test_readme_inference_with_official_layout_checkpoint(tmp_path):
    """The README recipe: build from a config, load a checkpoint strictly,
    run mmseg's inference_model on an image."""
    import numpy as np
    from mmseg.apis import inference_model

    model = _tiny_model()
    path = tmp_path / 'seg.pth'
    torch.save({'meta': {}, 'state_dict': model.state_dict()}, path)

    cfg = Config.fromfile(TINY_CFG)
    cfg.model.backbone.init_cfg = None
    init_default_scope('mmseg')
    model = MODELS.build(cfg.model)
    load_checkpoint(model, str(path), strict=True)
    model.cfg = cfg
    model.eval()
    image = np.random.default_rng(0).integers(0, 255, (70, 50, 3),
                                              dtype=np.uint8)
    result = inference_model(model, image)
    assert result.pred_sem_seg.data.shape == (1, 70, 50)
    assert result.seg_logits.data.shape == (28, 70, 50)
