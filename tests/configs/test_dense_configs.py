"""Every shipped depth / normal config: structure, loss and predict."""
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.structures import PixelData
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted((ROOT / 'configs' / 'depth').glob('*.py')) + sorted(
    (ROOT / 'configs' / 'normal').glob('*.py'))
SIZES = {'0.3b': 1024, '0.6b': 1280, '1b': 1536, '2b': 1920, 'tiny': 64}


def _meta(path):
    return re.match(r'sapiens_([^-]+)-', path.name).group(1), path.parent.name


def test_config_set_is_complete():
    names = {p.relative_to(ROOT / 'configs').as_posix() for p in CONFIGS}
    expected = {f'{t}/sapiens_{s}-200e_{t}_folder-1024x768.py'
                for t in ('depth', 'normal')
                for s in ('0.3b', '0.6b', '1b', '2b')}
    expected |= {f'{t}/sapiens_tiny-200e_{t}_folder-256x192.py'
                 for t in ('depth', 'normal')}
    assert names == expected


@pytest.mark.parametrize('task', ['depth', 'normal'])
def test_size_variants_differ_only_by_base_model_line(task):
    texts = {}
    for path in CONFIGS:
        size, t = _meta(path)
        if t == task and size != 'tiny':
            lines = path.read_text().splitlines()
            changed = [ln for ln in lines if f'models/sapiens_{size}.py' in ln]
            assert len(changed) == 1
            texts[size] = [ln for ln in lines if ln not in changed]
    assert len(texts) == 4
    assert all(t == texts['0.3b'] for t in texts.values())


@pytest.mark.parametrize('path', CONFIGS, ids=lambda p: p.stem)
def test_config_structure_follows_official_recipe(path):
    size, task = _meta(path)
    cfg = Config.fromfile(str(path))
    assert cfg.custom_imports == dict(imports=['sapiens_mm'],
                                      allow_failed_imports=False)
    assert cfg.default_scope == 'mmseg'
    model, bb, head = cfg.model, cfg.model.backbone, cfg.model.decode_head
    assert model.type == 'SapiensDenseEstimator' and model.task == task
    assert bb.type == 'mmpretrain.SapiensVisionTransformer'
    assert bb.arch == f'sapiens_{size}' and bb.with_cls_token is False
    assert head.in_channels == SIZES[size]
    # official: patch padding 2 for normals, none for depth
    assert bb.get('patch_cfg') == (dict(padding=2)
                                   if task == 'normal' else None)
    if size == 'tiny':
        assert bb.init_cfg is None
    else:
        assert bb.init_cfg.type == 'Pretrained'
        assert head.channels == (384 if task == 'depth' else 768)
        assert bb.img_size == (1024, 768)
    losses = head.loss_decode
    if task == 'depth':
        assert head.type == 'SapiensDepthHead' and losses.type == \
            'DepthSiLogLoss'
        assert len(head.deconv_out_channels) == 4
    else:
        assert head.type == 'SapiensNormalHead'
        assert [x.type for x in losses] == ['NormalCosineLoss',
                                            'NormalL1Loss']
        assert len(head.deconv_out_channels) == 3
    opt = cfg.optim_wrapper
    assert opt.optimizer == dict(type='AdamW', lr=5e-4, betas=(0.9, 0.999),
                                 weight_decay=0.1)
    assert opt.constructor == 'SapiensLayerDecayOptimWrapperConstructor'
    assert opt.paramwise_cfg.layer_decay_rate == 0.85
    assert opt.clip_grad == dict(max_norm=1.0, norm_type=2)
    assert cfg.train_cfg.max_epochs == 200
    assert [s.type for s in cfg.param_scheduler] == ['LinearLR', 'PolyLR']
    metric = 'SapiensDepthMetric' if task == 'depth' else \
        'SapiensNormalMetric'
    assert cfg.val_evaluator.type == metric
    assert cfg.test_evaluator.type == metric
    pipeline = [t.type for t in cfg.train_dataloader.dataset.pipeline]
    assert ('DenseRandomRotate' in pipeline) == (task == 'depth')
    assert 'DenseRandomFlip' in pipeline
    assert not any(p.startswith('/') for p in re.findall(
        r"'([^']*/[^']*)'", path.read_text()))


def _shrink(cfg):
    """Tiny encoder, 16-channel head (same depth), 64x48 input: fast on CPU.
    The full-size head layouts are checked in test_dense_heads.py."""
    cfg.model.data_preprocessor.size = (64, 48)
    cfg.model.backbone.update(arch='sapiens_tiny', img_size=(64, 48),
                              init_cfg=None)
    head = cfg.model.decode_head
    head.update(in_channels=64, channels=16,
                deconv_out_channels=(16, ) * len(head.deconv_out_channels),
                conv_out_channels=(16, ) * len(head.conv_out_channels))


@pytest.mark.parametrize('path', CONFIGS, ids=lambda p: p.stem)
def test_config_builds_and_runs_loss_and_predict(path):
    init_default_scope('mmseg')
    size, task = _meta(path)
    cfg = Config.fromfile(str(path))
    _shrink(cfg)
    model = MODELS.build(cfg.model)
    model.init_weights()
    c = 1 if task == 'depth' else 3
    samples = []
    for _ in range(2):
        sample = SegDataSample(metainfo=dict(
            img_shape=(64, 48), ori_shape=(70, 50), pad_shape=(64, 48)))
        target = (torch.rand(1, 64, 48) if task == 'depth' else
                  F.normalize(torch.randn(3, 64, 48), dim=0))
        target[:, :10] = -1 if task == 'depth' else 0  # background
        sample.set_data({f'gt_{task}_map': PixelData(data=target)})
        samples.append(sample)
    data = model.data_preprocessor(
        dict(inputs=[torch.randint(0, 255, (3, 64, 48), dtype=torch.uint8)
                     for _ in range(2)],
             data_samples=samples), training=True)
    losses = model(**data, mode='loss')
    assert all(k.startswith('decode.loss_') for k in losses)
    total = sum(losses.values())
    assert torch.isfinite(total) and total > 0
    model.eval()
    with torch.no_grad():
        out = model(data['inputs'], data['data_samples'], mode='predict')
    key = f'pred_{task}_map'
    assert out[0].get(key).data.shape == (c, 70, 50)
