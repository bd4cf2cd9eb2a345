"""Dense target transforms: loading, targets, alignment, flip, packing."""
import cv2
import numpy as np
import pytest
import torch
from mmengine.dataset import Compose
from mmengine.registry import init_default_scope
from mmseg.registry import TRANSFORMS


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
