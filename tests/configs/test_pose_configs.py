"""Every shipped pose config: official recipe, shared codec, builds with the
tiny encoder and runs loss / predict; layer decay; a short training run and
an evaluation on generated data."""
import copy
import importlib.util
import random
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope
from mmengine.dataset import pseudo_collate
from mmengine.optim import build_optim_wrapper
from mmengine.runner import Runner
from mmengine.structures import InstanceData, PixelData
from mmpose.registry import DATASETS, MODELS
from mmpose.structures import PoseDataSample

ROOT = Path(__file__).resolve().parents[2]
POSE = ROOT / 'configs' / 'pose'
CONFIGS = sorted(POSE.rglob('*.py'))
NAME = re.compile(r'sapiens_(?P<size>[^-]+)-(?:210e_(?P<ds>[a-z_]+)|'
                  r'goliath_on_coco_wholebody)-(?:1024x768|256x192)\.py$')

# sapiens_facts.md §1 / §3: (lr, layer_decay_rate, loss) per dataset, size
RECIPE = {
    'coco': {s: (5e-4, 0.85, 'KeypointMSELoss')
             for s in ['0.3b', '0.6b', '1b', '2b']},
    'coco_wholebody': {
        '0.3b': (5e-4, 0.75, 'KeypointMSELoss'),
        '0.6b': (5e-4, 0.75, 'KeypointMSELoss'),
        '1b': (5e-4, 0.85, 'KeypointMSELoss'),
        '2b': (5e-4, 0.85, 'KeypointMSELoss'),
    },
    'goliath': {
        '0.3b': (5e-5, 0.85, 'KeypointOHKMMSELoss'),
        '0.6b': (5e-5, 0.85, 'KeypointMSELoss'),
        '1b': (5e-5, 0.95, 'KeypointOHKMMSELoss'),
        '2b': (5e-5, 0.85, 'KeypointMSELoss'),
    },
}
DATASET_TYPE = dict(coco='CheckedCocoDataset',
                    coco_wholebody='CheckedCocoWholeBodyDataset',
                    goliath='GoliathDataset')
EMBED = {'0.3b': 1024, '0.6b': 1280, '1b': 1536, '2b': 1920, 'tiny': 64}


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


def cfg_id(path):
    return str(path.relative_to(POSE))


def parse_name(path):
    m = NAME.search(path.name)
    assert m, f'{path.name} does not follow the naming scheme'
    return m['size'], m['ds'] or 'goliath'


def test_every_dataset_has_all_sizes():
    for ds in RECIPE:
        sizes = {parse_name(p)[0] for p in (POSE / ds).glob('*-210e_*.py')}
        assert sizes == {'0.3b', '0.6b', '1b', '2b', 'tiny'}, ds


@pytest.mark.parametrize('path', CONFIGS, ids=cfg_id)
def test_config_recipe_and_shared_codec(path):
    size, ds = parse_name(path)
    cfg = Config.fromfile(str(path))
    assert cfg.custom_imports.imports == ['sapiens_mm']
    assert cfg.default_scope == 'mmpose'
    backbone, head = cfg.model.backbone, cfg.model.head
    assert backbone.type == 'mmpretrain.SapiensVisionTransformer'
    assert backbone.arch == f'sapiens_{size}'
    assert backbone.patch_cfg == dict(padding=2)
    assert head.type == 'SapiensHeatmapHead'
    assert head.in_channels == EMBED[size]
    assert cfg.model.test_cfg == dict(flip_test=True, flip_mode='heatmap',
                                      shift_heatmap=False)
    if size != 'tiny':
        assert backbone.init_cfg.type == 'Pretrained'
        lr, rate, loss = RECIPE[ds][size]
        assert head.loss.type == loss
        if loss == 'KeypointOHKMMSELoss':
            assert head.loss.topk == 128
        assert head.deconv_out_channels == (768, 768)
        assert head.conv_out_channels == (768, 768)
        assert cfg.codec == dict(type='UDPHeatmap', input_size=(768, 1024),
                                 heatmap_size=(192, 256), sigma=6)
    else:
        assert backbone.init_cfg is None
        lr, rate = RECIPE[ds]['0.3b'][0], 0.85
        assert cfg.codec.input_size == (192, 256)
    opt = cfg.optim_wrapper
    assert opt.optimizer.type == 'AdamW' and opt.optimizer.lr == lr
    assert opt.optimizer.weight_decay == 0.1
    assert opt.optimizer.betas == (0.9, 0.999)
    assert opt.paramwise_cfg == dict(layer_decay_rate=rate)
    assert opt.clip_grad == dict(max_norm=1.0, norm_type=2)
    assert cfg.train_cfg.max_epochs == 210
    # one codec: head decoder, training targets, input crop and encoder size
    codec = cfg.codec
    assert head.decoder == codec
    w, h = codec.input_size
    assert tuple(backbone.img_size) == (h, w)
    assert tuple(codec.heatmap_size) == (w // 4, h // 4)
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        for t in cfg[loader].dataset.pipeline:
            if t.type == 'GenerateTarget':
                assert t.encoder == codec
            if t.type == 'TopdownAffine':
                assert tuple(t.input_size) == tuple(codec.input_size)
                assert t.use_udp
    # the head predicts one heatmap per keypoint of the dataset
    dataset = DATASETS.get(cfg.train_dataloader.dataset.type)
    assert cfg.train_dataloader.dataset.type == DATASET_TYPE[ds]
    assert head.out_channels == dataset._load_metainfo()['num_keypoints']
    if 'on_coco_wholebody' in path.name:
        assert cfg.test_dataloader.dataset.type == 'GoliathDataset'
        assert 'coco_wholebody_val' in cfg.test_dataloader.dataset.ann_file
        assert cfg.test_evaluator.type == 'GoliathMetric'
        assert 'coco_wholebody_val' in cfg.test_evaluator.ann_file
    assert not any(str(v).startswith('/') for v in (
        cfg.train_dataloader.dataset.data_root,
        cfg.test_dataloader.dataset.data_root))


def tiny_model_cfg(cfg):
    """The config's model with the tiny encoder and a narrow head at 64x48,
    everything else (estimator, preprocessor, loss, flip test) unchanged."""
    model = copy.deepcopy(cfg.model)
    model.backbone.update(arch='sapiens_tiny', img_size=(64, 48),
                          init_cfg=None)
    model.head.update(in_channels=64, deconv_out_channels=(16, 16),
                      conv_out_channels=(16, 16),
                      decoder=dict(model.head.decoder, input_size=(48, 64),
                                   heatmap_size=(12, 16), sigma=2))
    return model


def fake_batch(meta, n=2):
    k = meta['num_keypoints']
    samples = []
    for _ in range(n):
        s = PoseDataSample(metainfo=dict(
            flip_indices=meta['flip_indices'], input_size=(48, 64),
            input_center=np.array([24., 32.]),
            input_scale=np.array([48., 64.])))
        s.gt_fields = PixelData(heatmaps=torch.rand(k, 16, 12))
        s.gt_instance_labels = InstanceData(keypoint_weights=torch.ones(1, k))
        s.gt_instances = InstanceData(
            bboxes=np.array([[0., 0., 48., 64.]], dtype=np.float32),
            bbox_scores=np.ones(1, dtype=np.float32))
        samples.append(s)
    inputs = [torch.randint(0, 256, (3, 64, 48), dtype=torch.uint8)] * n
    return dict(inputs=inputs, data_samples=samples)


@pytest.mark.parametrize('path', CONFIGS, ids=cfg_id)
def test_config_builds_tiny_and_runs_loss_and_predict(path):
    cfg = Config.fromfile(str(path))
    model = MODELS.build(tiny_model_cfg(cfg))
    model.init_weights()
    meta = DATASETS.get(cfg.test_dataloader.dataset.type)._load_metainfo()
    data = model.data_preprocessor(fake_batch(meta), training=True)
    losses = model(**data, mode='loss')
    assert torch.isfinite(losses['loss_kpt']) and losses['loss_kpt'] > 0
    model.eval()
    with torch.no_grad():
        preds = model(**model.data_preprocessor(fake_batch(meta)),
                      mode='predict')
    k = meta['num_keypoints']
    assert preds[0].pred_instances.keypoints.shape == (1, k, 2)
    assert preds[0].pred_instances.keypoint_scores.shape == (1, k)


def test_layer_decay_lrs_follow_the_formula_in_goliath_1b_config():
    """Goliath 1b (lr 5e-5, decay 0.95): lr = 5e-5 * 0.95 ** (L + 1 - id)
    per parameter, with L the encoder depth (read from the backbone, so the
    tiny encoder used here gives L = 2) and no weight decay on 1-D
    parameters, biases and pos_embed."""
    cfg = Config.fromfile(
        str(POSE / 'goliath/sapiens_1b-210e_goliath-1024x768.py'))
    assert 'num_layers' not in cfg.optim_wrapper.paramwise_cfg
    model = MODELS.build(tiny_model_cfg(cfg))
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    L = model.backbone.num_layers
    assert L == 2

    def layer_id(name):
        if name in ('backbone.pos_embed', 'backbone.cls_token') or \
                name.startswith('backbone.patch_embed.'):
            return 0
        if name.startswith('backbone.layers.'):
            return int(name.split('.')[2]) + 1
        return L + 1

    params = dict(model.named_parameters())
    seen = []
    for group in wrapper.optimizer.param_groups:
        for name in group['param_names']:
            seen.append(name)
            assert group['lr'] == pytest.approx(
                5e-5 * 0.95**(L + 1 - layer_id(name))), name
            no_wd = (params[name].ndim == 1 or name.endswith('.bias')
                     or 'pos_embed' in name)
            assert group['weight_decay'] == (0.0 if no_wd else 0.1), name
    assert sorted(seen) == sorted(params)
    lrs = {n: g['lr'] for g in wrapper.optimizer.param_groups
           for n in g['param_names']}
    assert lrs['head.final_layer.weight'] == pytest.approx(5e-5)
    assert lrs['backbone.ln1.weight'] == pytest.approx(5e-5)
    assert lrs['backbone.patch_embed.projection.weight'] == pytest.approx(
        5e-5 * 0.95**3)
    assert lrs['backbone.layers.0.attn.qkv.weight'] == pytest.approx(
        5e-5 * 0.95**2)


@pytest.fixture(scope='module')
def synthetic(tmp_path_factory):
    from sapiens_mm.datasets.synthetic import write_dataset
    out = tmp_path_factory.mktemp('pose_synth_cfg')
    write_dataset(out, num_train=4, num_val=2, seed=1, size=(256, 192),
                  progress=False)
    return out


TINY_GOLIATH = POSE / 'goliath/sapiens_tiny-210e_goliath-256x192.py'


@pytest.mark.slow
def test_tiny_goliath_training_lowers_the_loss(synthetic):
    """A few AdamW steps of the tiny 308-keypoint model (the config's
    pipeline, loss, layer decay and clipping; lr 2e-4 without the 500-step
    warm-up so that a handful of steps is enough) on a batch of generated
    data."""
    np.random.seed(0)  # the train pipeline's augmentations
    random.seed(0)
    cfg = Config.fromfile(str(TINY_GOLIATH))
    cfg.train_dataloader.dataset.data_root = str(synthetic)
    dataset = DATASETS.build(cfg.train_dataloader.dataset)
    batch = pseudo_collate([dataset[i] for i in range(2)])
    model = MODELS.build(cfg.model)
    model.init_weights()
    cfg.optim_wrapper.optimizer.lr = 2e-4
    wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    losses = [model.train_step(batch, wrapper)['loss'].item()
              for _ in range(6)]
    assert all(np.isfinite(losses))
    assert losses[-1] < 0.98 * losses[0], losses


@pytest.mark.skipif(
    importlib.util.find_spec('pkg_resources') is None,
    reason='mmpose registries used by the Runner import mmpose.visualization '
    '-> mmpose.apis -> pkg_resources, which setuptools>=81 no longer ships; '
    'install setuptools<81 in the environment')
@pytest.mark.slow
def test_tiny_goliath_config_evaluates_with_the_runner(synthetic, tmp_path):
    """tools/test.py path: Runner + val pipeline + flip test + GoliathMetric
    on the generated val split."""
    cfg = Config.fromfile(str(TINY_GOLIATH))
    cfg.work_dir = str(tmp_path)
    root = str(synthetic) + '/'
    cfg.test_dataloader.dataset.data_root = root
    cfg.test_dataloader.update(num_workers=0, persistent_workers=False,
                               batch_size=2)
    cfg.test_evaluator.ann_file = root + 'val/annotations/goliath_308.json'
    cfg.default_hooks.logger.interval = 1
    cfg.log_level = 'WARNING'
    runner = Runner.from_cfg(cfg)
    metrics = runner.test()
    assert 0.0 <= metrics['goliath/AP'] <= 1.0
    for group in ('body', 'foot', 'left_hand', 'right_hand', 'face'):
        assert f'goliath/{group}/AP' in metrics
