"""Dense target transforms: loading, targets, alignment, flip, packing.

Sapiens2 data: the dome_29 vocabulary, the official resizes and crops,
and the pointmap target (camera fitted to the augmented pointmap).
"""
import cv2
import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.dataset import Compose
from mmengine.registry import init_default_scope
from mmseg.registry import DATASETS, TRANSFORMS

from sapiens_mm.datasets import body_part_label_map, load_body_part_classes
from sapiens_mm.datasets.transforms import (
    AreaCubicResize,
    ResizePadImage,
    Sapiens2TopdownAffine,
    fit_intrinsics,
)
from sapiens_mm.utils.pointcloud import backproject


@pytest.fixture(autouse=True)
def _scope():
    init_default_scope('mmseg')


def _sphere(h, w):
    """Foreground disc with sphere depth and normals (OpenCV camera)."""
    v, u = np.mgrid[0:h, 0:w]
    x = (u - (w - 1) / 2) / (0.4 * w)
    y = (v - (h - 1) / 2) / (0.4 * h)
    r2 = x**2 + y**2
    fg = r2 < 1
    z = np.sqrt(np.clip(1 - r2, 0, 1))
    depth = np.where(fg, 3.0 - z, 0).astype(np.float32)
    normal = np.stack([x, y, -z], -1) * fg[..., None]
    return fg, depth, normal.astype(np.float32)


def _write(tmp_path, h=40, w=30, mask=None, depth=None, normal=None):
    fg, d, n = _sphere(h, w)
    mask = np.where(fg, 7, 0).astype(np.uint8) if mask is None else mask
    paths = dict(img_path=str(tmp_path / 'a.png'),
                 mask_path=str(tmp_path / 'a_mask.png'),
                 depth_path=str(tmp_path / 'a_depth.npy'),
                 normal_path=str(tmp_path / 'a_normal.npy'))
    cv2.imwrite(paths['img_path'], np.zeros((h, w, 3), np.uint8))
    cv2.imwrite(paths['mask_path'], mask)
    np.save(paths['depth_path'], d if depth is None else depth)
    np.save(paths['normal_path'], n if normal is None else normal)
    return paths, fg, d, n


def test_load_dense_annotations_reads_class_id_masks_and_arrays(tmp_path):
    paths, fg, depth, normal = _write(tmp_path)
    out = TRANSFORMS.build(dict(type='LoadDenseAnnotations'))(
        dict(paths, ori_shape=(40, 30), seg_fields=[]))
    assert out['gt_fg_mask'].dtype == np.uint8
    np.testing.assert_array_equal(out['gt_fg_mask'], fg)
    np.testing.assert_array_equal(out['gt_depth_map'], depth)
    np.testing.assert_array_equal(out['gt_normal_map'], normal)
    assert set(out['seg_fields']) == {'gt_fg_mask', 'gt_depth_map',
                                      'gt_normal_map'}
    # no mask: foreground from the target; other size: nearest resize
    out = TRANSFORMS.build(dict(type='LoadDenseAnnotations'))(
        dict(depth_path=paths['depth_path'], ori_shape=(80, 60)))
    assert out['gt_depth_map'].shape == (80, 60)
    np.testing.assert_array_equal(out['gt_fg_mask'],
                                  out['gt_depth_map'] > 0)


def test_load_dense_annotations_rejects_bad_shapes(tmp_path):
    paths, *_ = _write(tmp_path, normal=np.zeros((40, 30, 2), np.float32))
    with pytest.raises(ValueError, match=r'must be \(H, W, 3\)'):
        TRANSFORMS.build(dict(type='LoadDenseAnnotations'))(
            dict(normal_path=paths['normal_path']))
    # a dataset sample whose annotation entries are all empty
    with pytest.raises(KeyError, match='mask_path, depth_path'):
        TRANSFORMS.build(dict(type='LoadDenseAnnotations'))(
            dict(mask_path=None, depth_path='', normal_path=None))


def test_bare_images_pass_the_test_pipeline_unchanged():
    """mmseg's inference_model / MMSegInferencer hand the shipped test
    pipeline a bare image (no annotation key): loading and targets pass
    it through; a dataset sample still needs its target."""
    img = np.zeros((40, 30, 3), np.uint8)
    for step in ('LoadDenseAnnotations', 'GenerateDepthTarget',
                 'GenerateNormalTarget', 'GeneratePointmapTarget',
                 'GenerateAlbedoTarget'):
        results = dict(img=img, ori_shape=(40, 30))
        out = TRANSFORMS.build(dict(type=step))(results)
        assert set(out) == {'img', 'ori_shape'}
    with pytest.raises(KeyError, match='needs gt_depth_map'):
        TRANSFORMS.build(dict(type='GenerateDepthTarget'))(
            dict(img=img, depth_path='d.npy'))


def test_generate_depth_target_normalises_foreground():
    depth = np.array([[2.0, 4.0, 0.0], [3.0, np.nan, 6.0]], np.float32)
    mask = np.array([[1, 1, 0], [1, 1, 0]], np.uint8)
    out = TRANSFORMS.build(dict(type='GenerateDepthTarget'))(
        dict(gt_depth_map=depth, gt_fg_mask=mask))
    expected = np.array([[0.0, 1.0, -1.0], [0.5, -1.0, -1.0]], np.float32)
    np.testing.assert_array_equal(out['gt_depth_map'], expected)
    assert (out['depth_min'], out['depth_max']) == (2.0, 4.0)
    raw = TRANSFORMS.build(dict(type='GenerateDepthTarget', normalize=False))(
        dict(gt_depth_map=depth, gt_fg_mask=mask))
    np.testing.assert_array_equal(
        raw['gt_depth_map'], [[2.0, 4.0, -1.0], [3.0, -1.0, -1.0]])
    flat = TRANSFORMS.build(dict(type='GenerateDepthTarget'))(
        dict(gt_depth_map=np.full((2, 2), 5.0, np.float32)))
    np.testing.assert_array_equal(flat['gt_depth_map'], 0.0)
    empty = TRANSFORMS.build(dict(type='GenerateDepthTarget'))(
        dict(gt_depth_map=np.ones((2, 2), np.float32),
             gt_fg_mask=np.zeros((2, 2), np.uint8)))
    np.testing.assert_array_equal(empty['gt_depth_map'], -1.0)
    with pytest.raises(ValueError, match='<= 0'):
        TRANSFORMS.build(dict(type='GenerateDepthTarget',
                              background_value=1.0))


def test_generate_normal_target_unit_foreground_zero_background():
    normal = np.array([[[0, 0, -2], [3, 4, 0]], [[0, 0, 0], [1, 1, 1]]],
                      np.float32)
    mask = np.array([[1, 1], [1, 0]], np.uint8)
    out = TRANSFORMS.build(dict(type='GenerateNormalTarget'))(
        dict(gt_normal_map=normal, gt_fg_mask=mask))
    np.testing.assert_allclose(
        out['gt_normal_map'],
        [[[0, 0, -1], [0.6, 0.8, 0]], [[0, 0, 0], [0, 0, 0]]], atol=1e-7)


def test_flip_negates_normal_x_and_keeps_depth_values():
    fg, depth, normal = _sphere(6, 5)
    flip = TRANSFORMS.build(dict(type='DenseRandomFlip', prob=1.0))
    out = flip(dict(img=np.zeros((6, 5, 3), np.uint8),
                    gt_fg_mask=fg.astype(np.uint8), gt_depth_map=depth,
                    gt_normal_map=normal,
                    seg_fields=['gt_fg_mask', 'gt_depth_map',
                                'gt_normal_map']))
    np.testing.assert_array_equal(out['gt_depth_map'], depth[:, ::-1])
    np.testing.assert_array_equal(out['gt_normal_map'][..., 0],
                                  -normal[:, ::-1, 0])
    np.testing.assert_array_equal(out['gt_normal_map'][..., 1:],
                                  normal[:, ::-1, 1:])
    vflip = TRANSFORMS.build(
        dict(type='DenseRandomFlip', prob=1.0, direction='vertical'))
    out = vflip(dict(img=np.zeros((6, 5, 3), np.uint8), gt_normal_map=normal,
                     seg_fields=['gt_normal_map']))
    np.testing.assert_array_equal(out['gt_normal_map'][..., 1],
                                  -normal[::-1, :, 1])


def test_rotate_pads_background_and_refuses_normals():
    fg, depth, normal = _sphere(20, 20)
    rot = TRANSFORMS.build(dict(type='DenseRandomRotate', prob=1.0,
                                degree=(45, 45)))
    mask = np.ones((20, 20), np.uint8)
    out = rot(dict(img=np.full((20, 20, 3), 255, np.uint8), gt_fg_mask=mask,
                   gt_depth_map=np.full((20, 20), 2.0, np.float32),
                   seg_fields=['gt_fg_mask', 'gt_depth_map']))
    corner = (0, 0)
    assert out['gt_fg_mask'][corner] == 0 and out['gt_depth_map'][corner] == 0
    assert out['gt_fg_mask'][10, 10] == 1
    with pytest.raises(ValueError, match='depth only'):
        rot(dict(img=np.zeros((20, 20, 3), np.uint8), gt_normal_map=normal,
                 seg_fields=['gt_normal_map']))


def _encode(normal, fg):
    """Image whose colour is the normal, black background."""
    img = np.round((normal + 1) / 2 * 254).astype(np.uint8)
    img[~fg] = 0
    return img


@pytest.mark.parametrize('seed', [0, 1, 2, 3])
def test_train_pipeline_keeps_image_mask_and_targets_aligned(seed):
    """Geometric transforms move image, mask and targets together."""
    np.random.seed(seed)
    fg, depth, normal = _sphere(64, 48)
    pipeline = Compose([
        dict(type='RandomResize', scale=(48, 64), ratio_range=(0.5, 2.0),
             keep_ratio=True),
        dict(type='RandomCrop', crop_size=(64, 48)),
        dict(type='Resize', scale=(48, 64), keep_ratio=False),
        dict(type='DenseRandomFlip', prob=0.5),
        dict(type='GenerateNormalTarget'),
        dict(type='PackDenseInputs'),
    ])
    out = pipeline(dict(
        img=_encode(normal, fg), img_shape=(64, 48), ori_shape=(64, 48),
        gt_fg_mask=fg.astype(np.uint8), gt_normal_map=normal,
        seg_fields=['gt_fg_mask', 'gt_normal_map']))
    img = out['inputs'].numpy().transpose(1, 2, 0).astype(np.float64)
    target = out['data_samples'].gt_normal_map.data.numpy().transpose(1, 2, 0)
    assert out['inputs'].shape == (3, 64, 48)
    assert target.shape == (64, 48, 3)
    valid = np.linalg.norm(target, axis=-1) > 0
    # the image is bilinear and the targets nearest: compare away from edges
    inner = cv2.erode(valid.astype(np.uint8), np.ones((3, 3))) > 0
    assert inner.sum() > 50
    decoded = img / 254 * 2 - 1
    if out['data_samples'].flip:
        decoded[..., 0] *= -1  # the flip negated X in the target only
    cos = (decoded[inner] * target[inner]).sum(-1) / np.linalg.norm(
        decoded[inner], axis=-1)
    assert np.median(cos) > 0.99
    assert np.mean(img[~valid].sum(-1) < 200) > 0.9  # background stays dark


def test_pack_dense_inputs_shapes():
    fg, depth, normal = _sphere(6, 5)
    out = TRANSFORMS.build(dict(type='PackDenseInputs'))(
        dict(img=np.zeros((6, 5, 3), np.uint8), gt_depth_map=depth,
             gt_normal_map=normal, ori_shape=(6, 5), img_path='a.png'))
    sample = out['data_samples']
    assert sample.gt_depth_map.data.shape == (1, 6, 5)
    assert sample.gt_normal_map.data.shape == (3, 6, 5)
    assert sample.gt_normal_map.data.dtype == torch.float32
    assert sample.gt_depth_map.data.dtype == torch.float32
    np.testing.assert_array_equal(sample.gt_normal_map.data.numpy(),
                                  normal.transpose(2, 0, 1))
    assert sample.img_path == 'a.png' and sample.ori_shape == (6, 5)


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_depth_pipeline_with_rotation_keeps_alignment(seed):
    np.random.seed(seed)
    fg, depth, _ = _sphere(64, 48)
    # tilt the depth left to right so a flip of one side only would show
    depth = np.where(fg, depth + np.linspace(0, 1, 48)[None], 0)
    depth = depth.astype(np.float32)
    shade = np.where(fg, (depth - 2.0) * 125, 0).astype(np.uint8)
    pipeline = Compose([
        dict(type='RandomResize', scale=(48, 64), ratio_range=(0.7, 1.5),
             keep_ratio=True),
        dict(type='RandomCrop', crop_size=(64, 48)),
        dict(type='Resize', scale=(48, 64), keep_ratio=False),
        dict(type='DenseRandomRotate', prob=1.0, degree=30),
        dict(type='DenseRandomFlip', prob=0.5),
        dict(type='GenerateDepthTarget'),
        dict(type='PackDenseInputs'),
    ])
    out = pipeline(dict(
        img=np.repeat(shade[..., None], 3, -1), img_shape=(64, 48),
        ori_shape=(64, 48), gt_fg_mask=fg.astype(np.uint8),
        gt_depth_map=depth, seg_fields=['gt_fg_mask', 'gt_depth_map']))
    img = out['inputs'][0].numpy().astype(np.float64)
    target = out['data_samples'].gt_depth_map.data[0].numpy()
    valid = target >= 0
    inner = cv2.erode(valid.astype(np.uint8), np.ones((3, 3))) > 0
    assert inner.sum() > 50
    # the target is the visible foreground re-normalised: affine in depth,
    # so it follows the brightness that encodes depth pixel by pixel
    assert np.corrcoef(img[inner], target[inner])[0, 1] > 0.97
    assert target[inner].min() >= 0 and target[valid].max() == 1.0
    assert (img[~valid] < 30).mean() > 0.9


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
    from sapiens_mm.datasets.transforms import RandomDownUpSample, RandomGaussianNoise
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
