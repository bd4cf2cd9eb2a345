"""Every shipped seg config: structure, and loss / predict with a tiny arch."""
import re
from pathlib import Path

import pytest
import torch
from mmengine.config import Config
from mmengine.dataset import Compose
from mmengine.registry import init_default_scope
from mmengine.structures import PixelData
from mmseg.registry import MODELS
from mmseg.structures import SegDataSample

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted((ROOT / 'configs' / 'seg').glob('*/*.py'))
SIZES = {'0.3b': 1024, '0.6b': 1280, '1b': 1536, '2b': 1920, 'tiny': 64}


def _meta(path):
    size = re.match(r'sapiens_([^-]+)-', path.name).group(1)
    dataset = path.parent.name
    return size, dataset, 28 if dataset == 'goliath' else 20


def test_config_set_is_complete():
    names = {p.relative_to(ROOT / 'configs' / 'seg').as_posix()
             for p in CONFIGS}
    for dataset, epochs in (('goliath', 200), ('lip', 400), ('cihp', 400)):
        for size in ('0.3b', '0.6b', '1b', '2b'):
            assert (f'{dataset}/sapiens_{size}-{epochs}e_{dataset}'
                    f'-1024x768.py') in names
        assert f'{dataset}/sapiens_tiny-{epochs}e_{dataset}-256x192.py' \
            in names
    assert len(names) == 15


@pytest.mark.parametrize('dataset', ['goliath', 'lip', 'cihp'])
def test_size_variants_differ_only_by_base_model_line(dataset):
    texts = {}
    for path in CONFIGS:
        size, ds, _ = _meta(path)
        if ds == dataset and size != 'tiny':
            lines = path.read_text().splitlines()
            changed = [ln for ln in lines if f'models/sapiens_{size}.py' in ln]
            assert len(changed) == 1
            texts[size] = [ln for ln in lines if ln not in changed]
    assert len(texts) == 4
    assert all(t == texts['0.3b'] for t in texts.values())


def _shrink(cfg):
    """Tiny encoder, 16-channel head, 64x48 input: fast on CPU."""
    cfg.model.data_preprocessor.size = (64, 48)
    cfg.model.backbone.update(arch='sapiens_tiny', img_size=(64, 48),
                              init_cfg=None)
    cfg.model.decode_head.update(in_channels=64, channels=16,
                                 deconv_out_channels=(16, 16, 16),
                                 conv_out_channels=(16, 16, 16))


@pytest.mark.parametrize('path', CONFIGS, ids=lambda p: p.stem)
def test_config_builds_and_runs_loss_and_predict(path):
    init_default_scope('mmseg')
    size, dataset, num_classes = _meta(path)
    cfg = Config.fromfile(str(path))
    assert cfg.custom_imports == dict(imports=['sapiens_mm'],
                                      allow_failed_imports=False)
    bb, head = cfg.model.backbone, cfg.model.decode_head
    assert bb.type == 'mmpretrain.SapiensVisionTransformer'
    assert bb.arch == f'sapiens_{size}'
    assert head.type == 'SapiensSegHead'
    assert head.in_channels == SIZES[size]
    assert head.num_classes == num_classes
    assert head.loss_decode.class_weight == (
        'goliath_28' if dataset == 'goliath' else 'lip_cihp_20')
    # official: patch padding 2 on LIP / CIHP only
    assert bb.get('patch_cfg') == (None if dataset == 'goliath' else
                                   dict(padding=2))
    if size != 'tiny':
        assert head.deconv_out_channels == (768, 768, 768)
        assert head.conv_out_channels == (768, 768, 768)
        assert bb.init_cfg.type == 'Pretrained'
        assert not Path(bb.init_cfg.checkpoint).is_absolute()
        assert cfg.model.data_preprocessor.size == (1024, 768)
    assert cfg.train_cfg.max_epochs == (200 if dataset == 'goliath' else 400)
    assert cfg.optim_wrapper.paramwise_cfg.layer_decay_rate == 0.85
    assert cfg.optim_wrapper.optimizer.lr == 5e-4

    _shrink(cfg)
    model = MODELS.build(cfg.model)
    model.init_weights()
    gt = torch.randint(0, num_classes, (1, 64, 48))
    gt[:, :4] = 255
    sample = SegDataSample(gt_sem_seg=PixelData(data=gt))
    sample.set_metainfo(dict(img_shape=(64, 48), ori_shape=(64, 48),
                             pad_shape=(64, 48)))
    data = dict(inputs=[torch.randint(0, 256, (3, 64, 48), dtype=torch.uint8)],
                data_samples=[sample])
    data = model.data_preprocessor(data, True)
    losses = model.loss(data['inputs'], data['data_samples'])
    loss = losses['decode.loss_ce']
    assert loss.dim() == 0 and torch.isfinite(loss) and loss > 0

    model.eval()
    with torch.no_grad():
        logits = model._forward(data['inputs'])
        preds = model.predict(data['inputs'], data['data_samples'])
    assert logits.shape == (1, num_classes, 32, 24)  # 1/2 of the input
    assert preds[0].seg_logits.data.shape == (num_classes, 64, 48)
    assert preds[0].pred_sem_seg.data.shape == (1, 64, 48)
    assert preds[0].pred_sem_seg.data.max() < num_classes


@pytest.mark.parametrize('path', CONFIGS, ids=lambda p: p.stem)
def test_config_pipelines_build(path, tmp_path, monkeypatch):
    init_default_scope('mmseg')
    cfg = Config.fromfile(str(path))
    monkeypatch.chdir(tmp_path)  # no data/ folder here
    Compose(cfg.test_dataloader.dataset.pipeline)
    train = cfg.train_dataloader.dataset.pipeline
    backgrounds = [t for t in train if t.type == 'RandomBackground']
    if path.parent.name != 'goliath':
        assert not backgrounds
        Compose(train)
        return
    # goliath asks for backgrounds (p=0.8): a missing folder fails at build
    assert len(backgrounds) == 1 and backgrounds[0].prob == 0.8
    with pytest.raises(FileNotFoundError, match='no_humans'):
        Compose(train)
    (tmp_path / 'data' / 'coco' / 'no_humans').mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match='has no'):
        Compose(train)
