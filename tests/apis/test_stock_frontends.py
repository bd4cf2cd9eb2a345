"""Stock OpenMMLab front ends on every task's shipped tiny config.

Each tiny config is trained for one iteration with mmengine's Runner (the
``tools/train.py`` path) on generated people; the checkpoint it writes is
then run with

* pose: ``mmpose.apis.init_model`` + ``inference_topdown`` and
  ``MMPoseInferencer``;
* seg / depth / normal: ``mmseg.apis.init_model`` + ``inference_model`` and
  ``MMSegInferencer``.

The stock calls run inside :func:`sapiens_mm.zoo.safe_checkpoint_loading`
(mmengine's own loader refuses the Runner's numpy meta). The checkpoints
carry ``dataset_meta`` (keypoint names, class names and
palette), so the stock models and visualisers get the right names, and the
stock predictions equal :class:`~sapiens_mm.apis.SapiensInferencer`'s on
the same image, box and weights (the same test pipeline and model run in
both, so the comparison is exact up to float summation order).
"""
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope
from mmengine.runner import Runner
from inference_helpers import well_posed
from tiny_configs import TINY

from sapiens_mm.apis import SapiensInferencer
from sapiens_mm.datasets.metainfo import load_body_part_classes
from sapiens_mm.datasets.synthetic import write_dataset
from sapiens_mm.zoo import safe_checkpoint_loading

pytestmark = pytest.mark.slow  # four Runner trainings: about 40 s

GOLIATH_28 = load_body_part_classes('goliath_28')


@pytest.fixture(autouse=True)
def _safe_loading():
    """The stock front ends read the Runner's checkpoints (numpy arrays in
    their meta) through sapiens_mm's reader inside
    ``safe_checkpoint_loading()``, as a user runs them; mmengine's own
    loader refuses those objects (weights-only unpickling)."""
    with safe_checkpoint_loading():
        yield
BOX = np.array([[10, 8, 80, 110]], np.float32)


@pytest.fixture(scope='module')
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp('people')
    write_dataset(root, num_train=2, num_val=1, seed=0, size=(128, 96),
                  progress=False)
    bg = root / 'backgrounds'
    bg.mkdir()
    cv2.imwrite(str(bg / 'bg.jpg'),
                np.random.default_rng(0).integers(0, 255, (60, 90, 3),
                                                  dtype=np.uint8))
    return root


def _train_one_iteration(task: str, data: Path, work_dir: Path) -> str:
    """The tiny config trained for one iteration by the Runner; returns
    the checkpoint it writes (as tools/train.py does)."""
    cfg = Config.fromfile(str(TINY[task]))
    cfg.work_dir = str(work_dir)
    cfg.train_dataloader.update(num_workers=0, persistent_workers=False,
                                batch_size=2)
    cfg.train_dataloader.dataset.data_root = str(data)
    if task == 'seg':
        for step in cfg.train_dataloader.dataset.pipeline:
            if step.type == 'RandomBackground':
                step.background_root = str(data / 'backgrounds')
    cfg.train_cfg = dict(by_epoch=True, max_epochs=1, val_interval=10)
    cfg.val_dataloader = cfg.val_cfg = cfg.val_evaluator = None
    cfg.default_hooks.checkpoint = dict(type='CheckpointHook', interval=1)
    cfg.default_hooks.logger = dict(type='LoggerHook', interval=1)
    cfg.log_level = 'WARNING'
    torch.manual_seed(0)
    Runner.from_cfg(cfg).train()
    ckpt = work_dir / 'epoch_1.pth'
    assert ckpt.is_file()
    return str(ckpt)


@pytest.fixture(scope='module')
def checkpoints(data, tmp_path_factory):
    DefaultScope._instance_dict.clear()
    out = {
        task: _train_one_iteration(task, data,
                                   tmp_path_factory.mktemp(f'work_{task}'))
        for task in TINY
    }
    DefaultScope._instance_dict.clear()
    return out


@pytest.fixture(scope='module')
def photo():
    rng = np.random.default_rng(3)
    img = rng.integers(0, 256, (120, 90, 3), dtype=np.uint8)
    return cv2.GaussianBlur(img, (5, 5), 0)


def _ours(task, ckpt, img, **kwargs):
    inferencer = SapiensInferencer({task: (str(TINY[task]), ckpt)},
                                   device='cpu', detector='none')
    return inferencer(img, show_progress=False, **kwargs)[0]['predictions']


def test_pose_mmpose_init_model_and_inference_topdown(checkpoints, photo,
                                                      monkeypatch):
    from mmpose.apis import inference_topdown, init_model
    model = init_model(str(TINY['pose']), checkpoints['pose'], device='cpu')
    meta = model.dataset_meta  # from the checkpoint's meta
    assert meta['dataset_name'] == 'goliath' and meta['num_keypoints'] == 308
    assert meta['keypoint_id2name'][0] == 'nose'
    # A one-iteration model's heatmaps are nearly flat: their sub-pixel
    # refinement moves by ~2e-4 px with float32 summation order. Give both
    # models the same clear peaks (plus 1 % of their own output).
    ours_inferencer = SapiensInferencer(
        {'pose': (str(TINY['pose']), checkpoints['pose'])}, device='cpu',
        detector='none')
    well_posed(model, monkeypatch)
    well_posed(ours_inferencer.task_inferencers['pose'].model, monkeypatch)
    (sample, ) = inference_topdown(model, photo, BOX)
    keypoints = sample.pred_instances.keypoints
    assert keypoints.shape == (1, 308, 2)
    ours = ours_inferencer(photo, bboxes=BOX,
                           show_progress=False)[0]['predictions']['pose']
    # the same crop and head output decoded by mmpose and by our batched
    # decoder: float32 rounding only
    np.testing.assert_allclose(keypoints, ours['keypoints'], atol=1e-4,
                               rtol=0)
    np.testing.assert_allclose(sample.pred_instances.keypoint_scores,
                               ours['keypoint_scores'], atol=1e-5)


def test_pose_mmpose_inferencer(checkpoints, photo):
    from mmpose.apis import MMPoseInferencer
    inferencer = MMPoseInferencer(pose2d=str(TINY['pose']),
                                  pose2d_weights=checkpoints['pose'],
                                  det_model='whole_image', device='cpu')
    result = next(inferencer(photo, return_vis=True, show=False))
    (person, ) = result['predictions'][0]
    assert np.asarray(person['keypoints']).shape == (308, 2)
    # the visualiser draws the Goliath skeleton of the checkpoint
    visualizer = inferencer.inferencer.visualizer
    assert visualizer.dataset_meta['dataset_name'] == 'goliath'
    assert result['visualization'][0].shape == photo.shape
    ours = _ours('pose', checkpoints['pose'], photo)['pose']  # whole image
    np.testing.assert_allclose(person['keypoints'], ours['keypoints'][0],
                               atol=1e-3)


@pytest.mark.parametrize('task', ['seg', 'depth', 'normal'])
def test_dense_mmseg_init_model_and_inference_model(checkpoints, photo,
                                                    task):
    from mmseg.apis import inference_model, init_model
    model = init_model(str(TINY[task]), checkpoints[task], device='cpu')
    sample = inference_model(model, photo)
    ours = _ours(task, checkpoints[task], photo)[task]
    if task == 'seg':
        assert model.dataset_meta['classes'] == tuple(GOLIATH_28['classes'])
        labels = sample.pred_sem_seg.data[0].numpy()
        assert labels.shape == photo.shape[:2]
        np.testing.assert_array_equal(labels, ours)
    elif task == 'depth':
        np.testing.assert_allclose(sample.pred_depth_map.data[0].numpy(),
                                   ours, atol=1e-5)
    else:
        np.testing.assert_allclose(
            sample.pred_normal_map.data.numpy().transpose(1, 2, 0), ours,
            atol=1e-5)


@pytest.mark.parametrize('task', ['seg', 'depth', 'normal'])
def test_dense_mmseg_inferencer(checkpoints, photo, task, tmp_path):
    from mmseg.apis import MMSegInferencer
    inferencer = MMSegInferencer(str(TINY[task]), checkpoints[task],
                                 device='cpu')
    ours = _ours(task, checkpoints[task], photo)[task]
    if task == 'normal':
        # mmseg's postprocess knows sem_seg and depth_map outputs only:
        # normal predictions are read from the data samples
        sample = inferencer(photo, return_datasamples=True)
        np.testing.assert_allclose(
            sample.pred_normal_map.data.numpy().transpose(1, 2, 0), ours,
            atol=1e-5)
        return
    result = inferencer(photo, out_dir=str(tmp_path), return_vis=True)
    np.testing.assert_allclose(result['predictions'], ours, atol=1e-5)
    # seg: colours over the image; depth: the image above its colour map
    h, w = photo.shape[:2]
    assert result['visualization'].shape == ((h if task == 'seg' else 2 * h),
                                             w, 3)
    if task == 'seg':
        # the checkpoint's class names and palette, not Cityscapes'
        meta = inferencer.visualizer.dataset_meta
        assert list(meta['classes']) == GOLIATH_28['classes']
        assert [list(c) for c in meta['palette']] == GOLIATH_28['palette']


SAPIENS2_TINY = sorted(
    (Path(__file__).resolve().parents[2] / 'configs' / 'sapiens2').glob(
        '*/sapiens2_tiny-*.py'))


@pytest.mark.parametrize('config', SAPIENS2_TINY, ids=lambda p: p.parent.name)
def test_sapiens2_tiny_configs_run_with_stock_front_ends(config, photo):
    """Every Sapiens2 task's tiny config (random weights) through the stock
    builder, single-image API and inferencer of its library."""
    assert len(SAPIENS2_TINY) == 5  # pose, seg, normal, pointmap, albedo
    if config.parent.name == 'pose':
        from mmpose.apis import MMPoseInferencer, inference_topdown, init_model
        model = init_model(str(config), None, device='cpu')
        (sample, ) = inference_topdown(model, photo)
        k = model.dataset_meta['num_keypoints']
        assert sample.pred_instances.keypoints.shape == (1, k, 2)
        result = next(MMPoseInferencer(pose2d=str(config), device='cpu',
                                       det_model='whole_image')(photo))
        assert np.asarray(result['predictions'][0][0]['keypoints']).shape == (
            k, 2)
        return
    from mmseg.apis import MMSegInferencer, inference_model, init_model
    model = init_model(str(config), None, device='cpu')
    sample = inference_model(model, photo)
    fields = [k for k in sample.keys() if k.startswith('pred_')]
    assert fields
    for key in fields:  # at the image's size
        assert tuple(sample.get(key).shape) == photo.shape[:2], key
    again = MMSegInferencer(str(config), device='cpu')(
        photo, return_datasamples=True)
    assert sorted(k for k in again.keys() if k.startswith('pred_')) == sorted(
        fields)
