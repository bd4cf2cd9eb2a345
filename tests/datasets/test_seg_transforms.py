"""BodyPartRandomFlip (left/right label swap) and RandomBackground."""
import mmcv
import numpy as np
import pytest
from mmseg.registry import TRANSFORMS

from sapiens_mm.datasets.metainfo import load_body_part_classes

GOLIATH = load_body_part_classes('goliath_28')['classes']
LEFT_UPPER_ARM = GOLIATH.index('Left_Upper_Arm')  # 10
RIGHT_UPPER_ARM = GOLIATH.index('Right_Upper_Arm')  # 19
TORSO = GOLIATH.index('Torso')  # 21


def test_flip_moves_left_arm_to_mirror_with_right_arm_label():
    seg = np.zeros((4, 6), np.uint8)
    seg[1, 0] = LEFT_UPPER_ARM
    seg[2, 1] = TORSO
    seg[3, 5] = RIGHT_UPPER_ARM
    img = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)
    original_seg, original_img = seg.copy(), img.copy()
    flip = TRANSFORMS.build(dict(type='BodyPartRandomFlip', prob=1.0))
    out = flip(dict(img=img, gt_seg_map=seg, seg_fields=['gt_seg_map']))

    assert out['flip'] and out['flip_direction'] == 'horizontal'
    assert out['gt_seg_map'][1, 5] == RIGHT_UPPER_ARM  # mirrored + swapped
    assert out['gt_seg_map'][3, 0] == LEFT_UPPER_ARM
    assert out['gt_seg_map'][2, 4] == TORSO  # unpaired class: no swap
    assert out['gt_seg_map'][1, 0] == 0
    assert (out['gt_seg_map'] > 0).sum() == 3
    np.testing.assert_array_equal(out['img'], original_img[:, ::-1])
    np.testing.assert_array_equal(seg, original_seg)  # input untouched


def test_flip_uses_vocab_pairs_and_validates():
    lip = TRANSFORMS.build(
        dict(type='BodyPartRandomFlip', prob=1.0, vocab='lip_cihp_20'))
    assert lip.swap_seg_labels == [(14, 15), (16, 17), (18, 19)]
    seg = np.array([[14, 0, 17]], np.uint8)
    out = lip(dict(img=np.zeros((1, 3, 3), np.uint8), gt_seg_map=seg))
    np.testing.assert_array_equal(out['gt_seg_map'], [[16, 0, 15]])
    never = TRANSFORMS.build(dict(type='BodyPartRandomFlip', prob=0.0))
    out = never(dict(img=np.zeros((1, 3, 3), np.uint8), gt_seg_map=seg))
    assert not out['flip']
    np.testing.assert_array_equal(out['gt_seg_map'], seg)
    with pytest.raises(ValueError, match='pairs'):
        TRANSFORMS.build(dict(type='BodyPartRandomFlip',
                              swap_seg_labels=[(1, 2), (2, 3)]))


BG_COLOR = (10, 200, 30)  # BGR


@pytest.fixture
def bg_dir(tmp_path):
    d = tmp_path / 'no_humans'
    (d / 'sub').mkdir(parents=True)
    bg = np.zeros((30, 50, 3), np.uint8)
    bg[:] = BG_COLOR
    mmcv.imwrite(bg, str(d / 'sub' / 'street.jpg'))
    # jpeg may shift a flat colour by a level or two; store the truth
    return d, mmcv.imread(str(d / 'sub' / 'street.jpg'))[0, 0]


def _person(h=12, w=8):
    img = np.full((h, w, 3), 255, np.uint8)
    img[..., 0] = np.arange(w)[None] * 20
    seg = np.zeros((h, w), np.uint8)
    seg[3:9, 2:6] = TORSO
    seg[2, 2] = 255  # ignored label still counts as foreground
    return img, seg


@pytest.mark.parametrize('key', ['gt_seg_map', 'gt_depth_mask'])
def test_background_keeps_foreground_and_replaces_background(bg_dir, key):
    root, color = bg_dir
    img, seg = _person()
    fg = seg > 0
    results = dict(img=img.copy())
    if key == 'gt_seg_map':
        results['gt_seg_map'] = seg.copy()
        t = TRANSFORMS.build(
            dict(type='RandomBackground', prob=1.0, background_root=str(root)))
    else:  # a depth / normal pipeline: a (H, W, 3) mask field, channel 0
        results[key] = np.repeat(fg[..., None].astype(np.uint8) * 255, 3, 2)
        t = TRANSFORMS.build(
            dict(type='RandomBackground', prob=1.0,
                 background_root=str(root),
                 foreground_keys=('gt_seg_map', key)))
    out = t(results)
    np.testing.assert_array_equal(out['img'][fg], img[fg])
    assert (np.abs(out['img'][~fg].astype(int) - color.astype(int))
            <= 1).all()
    assert out['img'].shape == img.shape and out['img'].dtype == np.uint8
    if key == 'gt_seg_map':
        np.testing.assert_array_equal(out['gt_seg_map'], seg)


def test_background_probability_zero_and_missing_foreground(bg_dir):
    root, _ = bg_dir
    img, seg = _person()
    off = TRANSFORMS.build(dict(type='RandomBackground', prob=0.0,
                                background_root='does/not/exist'))
    out = off(dict(img=img.copy(), gt_seg_map=seg))
    np.testing.assert_array_equal(out['img'], img)
    on = TRANSFORMS.build(
        dict(type='RandomBackground', prob=1.0, background_root=str(root)))
    with pytest.raises(KeyError, match='LoadAnnotations'):
        on(dict(img=img.copy()))


def test_background_folder_missing_or_empty_fails_at_build(tmp_path):
    with pytest.raises(FileNotFoundError, match='does not exist'):
        TRANSFORMS.build(dict(type='RandomBackground', prob=0.5,
                              background_root=str(tmp_path / 'nope')))
    (tmp_path / 'empty').mkdir()
    (tmp_path / 'empty' / 'notes.txt').write_text('no images here')
    with pytest.raises(FileNotFoundError, match='has no .jpg'):
        TRANSFORMS.build(dict(type='RandomBackground', prob=0.5,
                              background_root=str(tmp_path / 'empty')))
