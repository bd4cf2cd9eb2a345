"""Every shipped Sapiens2 config: the official recipe, size variants as
one-line deltas, and loss + predict of the tiny-arch models."""
import pytest
import torch
from mmengine.config import Config

from sapiens2_helpers import (CONFIGS, LEAF, build_tiny, dense_samples,
                              leaf, pose_samples)

from sapiens_mm.engine.runner_cfg import build_runner, build_train_cfg

SIZES = ('0.4b', '0.8b', '1b', '5b')
# The tasks released at every size; matting is released at 1b only and its
# training recipe is not public (tested on its own below).
SIZED = sorted(t for t in LEAF if t != 'matting')
# The official recipe (fact sheet §6), per task: iterations and batch size
# per GPU for 0.4b / 0.8b / 1b / 5b.
ITERS = dict(pose=(1e4, 1e4, 2e4, 2e4), seg=(2e4, 3e4, 2e4, 5e4),
             normal=(2e4, 1e4, 4e4, 4e4), pointmap=(2e4, 2e4, 4e4, 4e4),
             albedo=(2e4, 2e4, 4e4, 4e4))
BATCH = dict(pose=(6, 12, 7, 2), seg=(12, 5, 8, 2), normal=(20, 12, 7, 3),
             pointmap=(8, 6, 3, 1), albedo=(20, 12, 7, 3))
DECAY = (0.8, 0.85, 0.9, 0.94)
CLIP = (2.0, 4.0, 4.0, 4.0)
EMBED = (1024, 1280, 1536, 2432)
LAYERS = (24, 32, 40, 56)


def test_config_set_is_complete():
    found = {p.relative_to(CONFIGS).as_posix()
             for p in CONFIGS.rglob('*.py')}
    expected = {leaf(t, s).relative_to(CONFIGS).as_posix()
                for t in SIZED for s in SIZES + ('tiny', )}
    expected |= {f'fsdp/sapiens2_{s}-{t}_fsdp_bf16.py' for s in ('1b', '5b')
                 for t in ('pose', 'seg', 'normal', 'pointmap')}
    # matting: the released 1b (official config name) and the tiny one
    expected |= {f'matting/sapiens2_{s}_matting_gss_p3m_metasim-{r}.py'
                 for s, r in (('1b', '1024x768'), ('tiny', '256x192'))}
    assert found == expected


@pytest.mark.parametrize('task', SIZED)
def test_size_variants_differ_only_by_the_size_base_line(task):
    texts = []
    for size in SIZES:
        lines = leaf(task, size).read_text().splitlines()
        changed = [ln for ln in lines if f'models/sapiens2_{size}.py' in ln]
        assert len(changed) == 1
        texts.append([ln for ln in lines if ln not in changed])
    assert all(t == texts[0] for t in texts)


@pytest.mark.parametrize('task', SIZED)
@pytest.mark.parametrize('index,size', list(enumerate(SIZES)))
def test_official_recipe(task, index, size):
    cfg = Config.fromfile(str(leaf(task, size)))
    assert cfg.custom_imports == dict(imports=['sapiens_mm'],
                                      allow_failed_imports=False)
    bb = cfg.model.backbone
    assert bb.type == 'mmpretrain.Sapiens2VisionTransformer'
    assert bb.arch == f'sapiens2_{size}' and bb.out_type == 'featmap'
    assert bb.init_cfg == dict(
        type='Pretrained',
        checkpoint=f'checkpoints/sapiens2/sapiens2_{size}_pretrain'
        '.safetensors')
    head = cfg.model.head if task == 'pose' else cfg.model.decode_head
    assert head.in_channels == EMBED[index]
    opt = cfg.optim_wrapper
    lr = 1e-4 if size == '5b' and task in ('pose', 'normal',
                                            'pointmap') else 5e-4
    assert opt.optimizer == dict(type='AdamW', lr=lr, betas=(0.9, 0.999),
                                 weight_decay=0.1)
    assert opt.constructor == 'SapiensLayerDecayOptimWrapperConstructor'
    assert opt.paramwise_cfg == dict(layer_decay_rate=DECAY[index],
                                     num_layers=LAYERS[index])
    assert opt.clip_grad == dict(max_norm=CLIP[index], norm_type=2)
    iters = int(ITERS[task][index])
    assert cfg.train_cfg.type == 'IterBasedTrainLoop'
    assert cfg.train_cfg.max_iters == iters
    assert cfg.train_dataloader.batch_size == BATCH[task][index]
    warmup, poly = cfg.param_scheduler
    assert (warmup.type, warmup.start_factor, warmup.begin, warmup.end,
            warmup.by_epoch) == ('LinearLR', 1e-3, 0, 500, False)
    assert (poly.type, poly.power, poly.eta_min, poly.begin, poly.end,
            poly.by_epoch) == ('PolyLR', 1.0, 0.0, 500, iters, False)
    assert cfg.randomness == dict(seed=0, diff_rank_seed=True)
    assert cfg.default_hooks.checkpoint.by_epoch is False
    mean = [123.675, 116.28, 103.53]
    assert cfg.model.data_preprocessor.mean == mean
    assert cfg.model.data_preprocessor.bgr_to_rgb is True


def test_task_specific_official_settings():
    pose = Config.fromfile(str(leaf('pose', '0.4b')))
    assert pose.model.head.loss == dict(type='KeypointMSELoss',
                                        use_target_weight=True,
                                        loss_weight=10.0)
    assert pose.model.head.decoder == dict(
        type='UDPHeatmap', input_size=(768, 1024), heatmap_size=(192, 256),
        sigma=6)
    assert pose.model.test_cfg == dict(flip_test=True, flip_mode='heatmap',
                                       shift_heatmap=False)
    assert pose.val_pipeline[2].type == 'Sapiens2TopdownAffine'
    seg = Config.fromfile(str(leaf('seg', '1b')))
    assert seg.model.decode_head.num_classes == 29
    assert [x.type for x in seg.model.decode_head.loss_decode] == [
        'CrossEntropyLoss', 'BodyPartDiceLoss']
    assert seg.test_pipeline[1].type == 'AreaCubicResize'
    assert seg.val_evaluator.nan_to_num == 0
    for task in ('normal', 'pointmap', 'albedo'):
        cfg = Config.fromfile(str(leaf(task, '5b')))
        assert cfg.model.type == 'Sapiens2DenseEstimator'
        assert cfg.model.task == task
        assert cfg.test_pipeline[1] == dict(type='ResizePadImage',
                                            size=(1024, 768))
    # matting: the whole frame stretched as for seg (no aspect-kept pad);
    # the 1b encoder with its pretrained init, the 1b normal recipe
    matting = Config.fromfile(str(leaf('matting', '1b')))
    assert leaf('matting', '1b').stem == \
        'sapiens2_1b_matting_gss_p3m_metasim-1024x768'
    assert matting.model.task == 'matting'
    assert matting.model.backbone.arch == 'sapiens2_1b'
    assert matting.model.decode_head.in_channels == 1536
    assert matting.test_pipeline[1] == dict(
        type='AreaCubicResize', scale=(768, 1024), keep_ratio=False)
    assert matting.optim_wrapper.paramwise_cfg == dict(
        layer_decay_rate=0.9, num_layers=40)
    assert matting.val_evaluator == dict(type='MattingMetric')


@pytest.mark.slow
@pytest.mark.parametrize('size', ['1b', '5b'])
@pytest.mark.parametrize('task', ['pose', 'seg', 'normal', 'pointmap'])
def test_fsdp_configs_build_a_flexible_runner(tmp_path, size, task):
    path = CONFIGS / 'fsdp' / f'sapiens2_{size}-{task}_fsdp_bf16.py'
    shipped = Config.fromfile(str(path))
    task_cfg = Config.fromfile(str(leaf(task, size)))
    assert shipped.runner_type == 'FlexibleRunner'
    assert shipped.strategy.type == 'FSDPStrategy'
    assert shipped.strategy.model_wrapper.auto_wrap_policy.class_names == [
        'Sapiens2TransformerBlock']
    assert shipped.model.backbone.with_cp is True
    assert shipped.optim_wrapper.type == 'FSDPAmpOptimWrapper'
    assert shipped.optim_wrapper.optimizer == task_cfg.optim_wrapper.optimizer
    runner = build_runner(build_train_cfg(str(path),
                                          work_dir=str(tmp_path / 'w')))
    from mmengine.runner import FlexibleRunner
    assert isinstance(runner, FlexibleRunner)


LOSSES = dict(
    pose={'loss_kpt', 'acc_pose'},
    seg={'decode.loss_ce', 'decode.loss_dice', 'decode.acc_seg'},
    normal={'decode.loss_cos', 'decode.loss_l1', 'decode.loss_grad'},
    pointmap={f'decode.loss_pm_{t}' for t in (
        'l1', 'multiscale', 'silog', 'intrinsics', 'shift_l1', 'normal',
        'scale')},
    albedo={f'decode.loss_albedo_{t}' for t in ('l1', 'grad',
                                                 'chromaticity')},
    matting={f'decode.loss_matting_{t}' for t in (
        'alpha_l1', 'laplacian', 'composition', 'foreground')})
PRED = dict(seg=[('pred_sem_seg', 1)], normal=[('pred_normal_map', 3)],
            pointmap=[('pred_pointmap', 3), ('pred_depth_map', 1)],
            albedo=[('pred_albedo_map', 3)],
            matting=[('pred_matting', 4), ('pred_alpha', 1),
                     ('pred_foreground', 3)])


@pytest.mark.parametrize('task', sorted(LEAF))
def test_tiny_config_runs_loss_and_predict(task):
    cfg, model = build_tiny(task)
    H, W = cfg.image_size
    assert cfg.model.backbone.arch == 'sapiens2_tiny'
    x = torch.randn(2, 3, H, W)
    samples = (pose_samples(H, W) if task == 'pose' else
               dense_samples(task, H, W))
    losses = model(x, samples, mode='loss')
    assert set(losses) == LOSSES[task]
    for name, value in losses.items():
        assert torch.isfinite(value).all(), name
    model.eval()
    with torch.no_grad():
        out = model(x, samples, mode='predict')
    if task == 'pose':
        assert out[0].pred_instances.keypoints.shape == (1, 308, 2)
        return
    for key, channels in PRED[task]:
        assert out[0].get(key).data.shape == (channels, H, W), key
    if task == 'normal':
        assert torch.allclose(out[0].pred_normal_map.data.norm(dim=0),
                              torch.ones(H, W), atol=1e-5)
    if task in ('albedo', 'matting'):
        data = out[0].get(PRED[task][0][0]).data
        assert data.min() >= 0 and data.max() <= 1
