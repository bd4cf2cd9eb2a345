"""Sapiens2 data: the dome_29 vocabulary, the official resizes and crops,
and the pointmap target (camera fitted to the augmented pointmap)."""
import cv2
import numpy as np
import pytest
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmseg.registry import DATASETS, TRANSFORMS

from sapiens_mm.datasets import body_part_label_map, load_body_part_classes
from sapiens_mm.datasets.transforms import (AreaCubicResize, ResizePadImage,
                                            Sapiens2TopdownAffine,
                                            fit_intrinsics)
from sapiens_mm.utils.pointcloud import backproject

# The 29 classes of the fact sheet (§5), typed in by hand.
DOME29 = [
    'Background', 'Apparel', 'Eyeglass', 'Face_Neck', 'Hair', 'Left_Foot',
    'Left_Hand', 'Left_Lower_Arm', 'Left_Lower_Leg', 'Left_Shoe',
    'Left_Sock', 'Left_Upper_Arm', 'Left_Upper_Leg', 'Lower_Clothing',
    'Right_Foot', 'Right_Hand', 'Right_Lower_Arm', 'Right_Lower_Leg',
    'Right_Shoe', 'Right_Sock', 'Right_Upper_Arm', 'Right_Upper_Leg',
    'Torso', 'Upper_Clothing', 'Lower_Lip', 'Upper_Lip', 'Lower_Teeth',
    'Upper_Teeth', 'Tongue'
]


def test_dome29_vocabulary():
    v2 = load_body_part_classes('dome_29')
    v1 = load_body_part_classes('goliath_28')
    assert v2['classes'] == DOME29
    v1_palette = dict(zip(v1['classes'], map(tuple, v1['palette'])))
    for name, color in zip(v2['classes'], v2['palette']):
        assert tuple(color) == v1_palette.get(name, (14, 204, 182)), name
    assert v2['flip_swap_pairs'] == [[5, 14], [6, 15], [7, 16], [8, 17],
                                     [9, 18], [10, 19], [11, 20], [12, 21]]
    for left, right in v2['flip_swap_pairs']:
        assert DOME29[left].replace('Left', 'Right') == DOME29[right]
    assert v2['class_weight'] == [
        0.1, 10, 10, 3, 2, 4, 4, 2, 2, 6, 10, 3, 3, 1, 4, 4, 2, 2, 6, 10, 3,
        3, 1, 1, 10, 10, 10, 10, 10]
    with pytest.raises(KeyError, match='Unknown vocabulary'):
        load_body_part_classes('dome_30')


def test_label_maps_to_dome29():
    from_v1 = body_part_label_map('goliath_28')
    assert from_v1 == {k: k if k < 2 else k + 1 for k in range(28)}
    original = load_body_part_classes('goliath_28')['original_34_classes']
    from_34 = body_part_label_map('original_34')
    by_name = {name: from_34[i] for i, name in enumerate(original)}
    assert by_name['Chair'] == 0
    assert by_name['Eyeglass_Frame'] == by_name['Eyeglass_Lenses'] == 2
    assert by_name['Lower_Spandex'] == 13
    assert by_name['Headset'] == by_name['Visible_Badge'] == 255
    for name, new in by_name.items():
        if new not in (0, 2, 13, 255) or name in DOME29:
            assert DOME29[new] == name
    # v1's own 34 -> 28 map still ignores all six
    assert sum(v == 255 for v in body_part_label_map(
        'original_34', 'goliath_28').values()) == 6


def test_resize_pad_image_keeps_aspect_and_centres():
    rng = np.random.default_rng(0)
    img = rng.integers(0, 255, (100, 50, 3), dtype=np.uint8)
    out = ResizePadImage(size=(64, 48))(dict(img=img.copy()))
    # scale = min(48 / 50, 64 / 100) = 0.64 -> 32 x 64, 8 columns each side
    assert out['img_padding_size'] == (8, 8, 0, 0)
    assert out['img'].shape == (64, 48, 3) and out['img_shape'] == (64, 48)
    expected = cv2.resize(img, (32, 64), interpolation=cv2.INTER_LINEAR)
    assert np.array_equal(out['img'][:, 8:40], expected)
    assert not out['img'][:, :8].any() and not out['img'][:, 40:].any()
    # int() sizes: 49 * 0.64 = 31.36 -> 31 columns; of the 17 padding
    # columns the extra one goes to the right
    out = ResizePadImage(size=(64, 48))(dict(img=img[:, :49].copy()))
    assert out['img_padding_size'] == (8, 9, 0, 0)


@pytest.mark.parametrize('width,flag', [(1000, cv2.INTER_AREA),
                                        (400, cv2.INTER_CUBIC)])
def test_area_cubic_resize_picks_the_official_interpolation(width, flag):
    rng = np.random.default_rng(1)
    img = rng.integers(0, 255, (700, width, 3), dtype=np.uint8)
    out = AreaCubicResize(scale=(768, 1024), keep_ratio=False)(
        dict(img=img.copy()))
    assert np.array_equal(out['img'],
                          cv2.resize(img, (768, 1024), interpolation=flag))


@pytest.mark.parametrize('box_w,flag', [(300.0, cv2.INTER_AREA),
                                        (30.0, cv2.INTER_CUBIC)])
def test_sapiens2_topdown_affine_interpolation(box_w, flag):
    from mmpose.structures.bbox import get_udp_warp_matrix
    rng = np.random.default_rng(2)
    img = rng.integers(0, 255, (400, 400, 3), dtype=np.uint8)
    results = dict(img=img.copy(), bbox_center=np.array([[200.0, 200.0]]),
                   bbox_scale=np.array([[box_w, box_w / 0.75]]),
                   keypoints=np.array([[[200.0, 200.0]]]))
    out = Sapiens2TopdownAffine(input_size=(48, 64))(results)
    matrix = get_udp_warp_matrix(np.array([200.0, 200.0]),
                                 np.array([box_w, box_w / 0.75]), 0.0,
                                 output_size=(48, 64))
    assert np.array_equal(out['img'],
                          cv2.warpAffine(img, matrix, (48, 64), flags=flag))
    # the box centre lands in the middle of the crop (UDP: (w - 1) / 2)
    assert np.allclose(out['transformed_keypoints'][0, 0], [23.5, 31.5])


def test_fit_intrinsics_recovers_the_camera():
    K = np.array([[300.0, 0, 40.5], [0, 310.0, 29.0], [0, 0, 1]])
    depth = 2.0 + np.random.default_rng(3).random((60, 80))
    points = backproject(depth, K)
    valid = np.ones((60, 80), bool)
    assert np.allclose(fit_intrinsics(points, valid),
                       (300.0, 310.0, 40.5, 29.0))
    assert fit_intrinsics(points, np.zeros_like(valid)) is None


def test_pointmap_target_follows_resize_and_flip():
    """After a 2x nearest downscale and a horizontal flip of the arrays, the
    fitted camera is the one of the new image and the target is the metric
    pointmap times canonical_focal / fx."""
    init_default_scope('mmseg')
    K = np.array([[300.0, 0, 39.5], [0, 300.0, 29.5], [0, 0, 1]])
    depth = 2.0 + np.random.default_rng(4).random((60, 80))
    points = backproject(depth, K).astype(np.float32)
    results = dict(img=np.zeros((60, 80, 3), np.uint8), gt_pointmap=points,
                   gt_fg_mask=np.ones((60, 80), np.uint8),
                   seg_fields=['gt_pointmap', 'gt_fg_mask'])
    results = TRANSFORMS.build(dict(type='Resize', scale=(40, 30),
                                    keep_ratio=False))(results)
    results = TRANSFORMS.build(dict(type='DenseRandomFlip', prob=1.0))(
        results)
    flipped_x = results['gt_pointmap'][..., 0]
    assert np.allclose(flipped_x, -points[::2, ::2][:, ::-1, 0], atol=1e-6)
    results = TRANSFORMS.build(dict(type='GeneratePointmapTarget',
                                    canonical_focal=75.0))(results)
    fx, fy, cx, cy = results['pointmap_intrinsics']
    # nearest downscale by 2 samples source pixel 2u (+0.5 offset rounding):
    # fx halves; the flip mirrors the principal point
    assert fx == pytest.approx(150.0, rel=1e-3)
    assert fy == pytest.approx(150.0, rel=1e-3)
    assert results['pointmap_scale'] == pytest.approx(75.0 / fx)
    target = results['gt_pointmap']
    metric = points[::2, ::2][:, ::-1] * np.array([-1, 1, 1], np.float32)
    assert np.allclose(target, metric * results['pointmap_scale'],
                       atol=1e-5)


@pytest.mark.slow
def test_pointmap_pipeline_on_files(tmp_path):
    """The tiny pointmap config's pipelines read a folder dataset."""
    init_default_scope('mmseg')
    split = tmp_path / 'train'
    for sub in ('images', 'masks', 'pointmaps'):
        (split / sub).mkdir(parents=True)
    K = np.array([[120.0, 0, 50], [0, 120.0, 60], [0, 0, 1]])
    points = backproject(np.full((120, 100), 3.0), K).astype(np.float32)
    mask = np.zeros((120, 100), np.uint8)
    mask[20:100, 30:70] = 1
    cv2.imwrite(str(split / 'images/a.png'), np.full((120, 100, 3), 128,
                                                     np.uint8))
    cv2.imwrite(str(split / 'masks/a.png'), mask)
    np.save(split / 'pointmaps/a.npy', points)
    cfg = Config.fromfile('configs/sapiens2/pointmap/'
                          'sapiens2_tiny-pointmap_folder-256x192.py')
    for pipeline, canonical in ((cfg.train_pipeline, True),
                                (cfg.test_pipeline, False)):
        dataset = DATASETS.build(dict(
            type='PointmapFolderDataset', data_root=str(tmp_path),
            data_prefix=dict(img_path='train/images',
                             mask_path='train/masks',
                             pointmap_path='train/pointmaps'),
            pipeline=pipeline))
        sample = dataset[0]['data_samples']
        gt = sample.gt_pointmap.data.numpy()
        valid = gt[2] > 0
        assert valid.any() and not valid.all()  # mask applied
        if canonical:
            assert gt.shape == (3, 256, 192)
            assert np.isfinite(sample.pointmap_scale)
        else:  # metric, at the original size, padding recorded
            assert gt.shape == (3, 120, 100)
            assert np.allclose(gt[2][valid], 3.0)
            # 100x120 -> scale min(192 / 100, 256 / 120) = 1.92: 192x230
            assert sample.img_padding_size == (0, 0, 13, 13)


def test_noise_and_down_up_sample():
    from sapiens_mm.datasets.transforms import (RandomDownUpSample,
                                                RandomGaussianNoise)
    np.random.seed(0)
    grey = np.full((100, 100, 3), 128, np.uint8)
    out = RandomGaussianNoise(prob=1.0, std_range=(5, 5))(
        dict(img=grey.copy()))['img']
    assert out.dtype == np.uint8
    # 30000 samples of N(128, 5) rounded: the std is 5 within a few %
    assert abs(out.astype(float).std() - 5.0) < 0.2
    assert abs(out.astype(float).mean() - 128) < 0.2
    same = RandomGaussianNoise(prob=0.0)(dict(img=grey.copy()))['img']
    assert np.array_equal(same, grey)
    img = np.random.default_rng(5).integers(0, 255, (40, 60, 3), np.uint8)
    out = RandomDownUpSample(prob=1.0, scale_range=(0.5, 0.5))(
        dict(img=img.copy()))['img']
    expected = cv2.resize(cv2.resize(img, (30, 20)), (60, 40))
    assert np.array_equal(out, expected)
    with pytest.raises(ValueError, match='scale_range'):
        RandomDownUpSample(scale_range=(0.0, 0.5))


@pytest.mark.parametrize('task', ['seg', 'normal', 'albedo'])
def test_tiny_train_pipelines_run(tmp_path, task):
    """The official train pipelines (with mmpretrain's GaussianBlur and
    Solarize in the mmseg scope) on a generated sample."""
    from sapiens2_helpers import leaf
    init_default_scope('mmseg')
    cfg = Config.fromfile(str(leaf(task, 'tiny')))
    img = np.random.default_rng(6).integers(0, 255, (150, 100, 3), np.uint8)
    cv2.imwrite(str(tmp_path / 'a.png'), img)
    mask = np.zeros((150, 100), np.uint8)
    mask[30:120, 20:80] = 3
    cv2.imwrite(str(tmp_path / 'm.png'), mask)
    info = dict(img_path=str(tmp_path / 'a.png'), seg_fields=[])
    pipeline = cfg.train_pipeline
    if task == 'seg':
        info.update(seg_map_path=str(tmp_path / 'm.png'), label_map=None,
                    reduce_zero_label=False)
        # no background pictures here: RandomBackground off
        pipeline = [t for t in pipeline if t.type != 'RandomBackground']
    else:
        key = 'normal' if task == 'normal' else 'albedo'
        target = np.zeros((150, 100, 3), np.float32)
        target[..., 2] = -1 if task == 'normal' else 0.5
        np.save(tmp_path / 't.npy', target)
        info.update({f'{key}_path': str(tmp_path / 't.npy'),
                     'mask_path': str(tmp_path / 'm.png')})
    from mmengine.dataset import Compose
    np.random.seed(0)
    for _ in range(3):  # the random steps taken or not
        packed = Compose(pipeline)(dict(info))
        assert packed['inputs'].shape == (3, 256, 192)
