"""Body-part datasets: folder layout, LIP / CIHP layouts, 34 -> 28 mapping."""
import os.path as osp

import mmcv
import numpy as np
import pytest
from mmengine.registry import init_default_scope
from mmseg.registry import DATASETS

from sapiens_mm.datasets import goliath_34_to_28_label_map
from sapiens_mm.datasets.metainfo import load_body_part_classes

LOAD = [dict(type='LoadImageFromFile'), dict(type='LoadAnnotations')]


def _write(path, array):
    mmcv.imwrite(array, str(path), auto_mkdir=True)


def _pair(img_dir, mask_dir, stem, mask, img_ext='.png'):
    h, w = mask.shape
    _write(osp.join(img_dir, stem + img_ext), np.full((h, w, 3), 90, np.uint8))
    _write(osp.join(mask_dir, stem + '.png'), mask.astype(np.uint8))


@pytest.fixture(autouse=True)
def _scope():
    init_default_scope('mmseg')


@pytest.mark.slow
def test_folder_dataset_reads_split_images_masks_layout(tmp_path):
    """The synthetic generator's <split>/images + <split>/masks layout,
    images and masks matched by (relative) stem."""
    root = tmp_path / 'synth'
    for split, n in (('train', 3), ('val', 1)):
        for i in range(n):
            mask = np.zeros((8, 6), np.uint8)
            mask[2:6, 1:5] = i + 1
            ext = '.jpg' if i == 1 else '.png'
            _pair(root / split / 'images' / ('sub' if i == 2 else ''),
                  root / split / 'masks' / ('sub' if i == 2 else ''),
                  f'person_{i:03d}', mask, ext)
    ds = DATASETS.build(
        dict(type='BodyPartSegDataset', data_root=str(root),
             data_prefix=dict(img_path='train/images',
                              seg_map_path='train/masks'),
             pipeline=LOAD))
    assert len(ds) == 3
    assert ds.metainfo['classes'] == tuple(
        load_body_part_classes('goliath_28')['classes'])
    assert len(ds.metainfo['palette']) == 28
    for i in range(3):
        info = ds.get_data_info(i)
        img_stem = osp.splitext(osp.relpath(info['img_path'],
                                            root / 'train/images'))[0]
        mask_stem = osp.splitext(osp.relpath(info['seg_map_path'],
                                             root / 'train/masks'))[0]
        assert img_stem == mask_stem
        sample = ds[i]
        assert sample['img'].shape == (8, 6, 3)
        assert set(np.unique(sample['gt_seg_map'])) == {0, i + 1}
    assert ds[2]['img_path'].endswith(osp.join('sub', 'person_002.png'))
    assert ds[2]['gt_seg_map'][3, 3] == 3

    val = DATASETS.build(
        dict(type='BodyPartSegDataset', data_root=str(root),
             data_prefix=dict(img_path='val/images',
                              seg_map_path='val/masks'),
             test_mode=True, pipeline=LOAD))
    assert len(val) == 1


def test_folder_dataset_errors(tmp_path):
    root = tmp_path / 'd'
    _pair(root / 'images', root / 'masks', 'a', np.zeros((4, 4)))
    _write(root / 'images' / 'b.jpg', np.zeros((4, 4, 3), np.uint8))
    with pytest.raises(FileNotFoundError, match='1 of 2 images .* no mask'):
        DATASETS.build(dict(type='BodyPartSegDataset', data_root=str(root)))
    # a subset listed in ann_file (stems relative to the image folder)
    (root / 'subset.txt').write_text('a\n')
    subset = DATASETS.build(dict(type='BodyPartSegDataset',
                                 data_root=str(root), ann_file='subset.txt'))
    assert len(subset) == 1
    (root / 'bad.txt').write_text('zzz\n')
    with pytest.raises(FileNotFoundError, match="lists 'zzz'"):
        DATASETS.build(dict(type='BodyPartSegDataset', data_root=str(root),
                            ann_file='bad.txt'))
    with pytest.raises(FileNotFoundError, match='image folder'):
        DATASETS.build(dict(type='BodyPartSegDataset',
                            data_root=str(tmp_path / 'missing')))
    with pytest.raises(ValueError, match='Unknown label_map'):
        DATASETS.build(dict(type='BodyPartSegDataset', data_root=str(root),
                            label_map='coco_to_goliath'))


def test_goliath_34_to_28_mapping(tmp_path):
    mapping = goliath_34_to_28_label_map()
    original = load_body_part_classes('goliath_28')['original_34_classes']
    new = load_body_part_classes('goliath_28')['classes']
    assert len(mapping) == 34
    removed = {'Chair', 'Eyeglass_Frame', 'Eyeglass_Lenses', 'Headset',
               'Lower_Spandex', 'Visible_Badge'}
    for old_id, name in enumerate(original):
        if name in removed:
            assert mapping[old_id] == 255
        else:
            assert new[mapping[old_id]] == name
    assert sorted(v for v in mapping.values() if v != 255) == list(range(28))
    # spot checks by hand: Chair 2 -> ignore, Face_Neck 5 -> 2, Tongue 33 -> 27
    assert (mapping[2], mapping[5], mapping[33]) == (255, 2, 27)

    root = tmp_path / 'g34'
    _pair(root / 'images', root / 'masks', 'p',
          np.array([[0, 2, 5], [33, 28, 16]]))
    ds = DATASETS.build(
        dict(type='BodyPartSegDataset', data_root=str(root),
             label_map='goliath_34_to_28', pipeline=LOAD))
    # 28 = Visible_Badge -> 255, 16 = Lower_Clothing -> 12
    np.testing.assert_array_equal(ds[0]['gt_seg_map'],
                                  [[0, 255, 2], [27, 255, 12]])


@pytest.mark.parametrize('layout', [
    ('images/val_images', 'segmentations/val_segmentations'),
    ('TrainVal_images/val_images',
     'TrainVal_parsing_annotations/val_segmentations'),
])
def test_lip_layouts(tmp_path, layout):
    root = tmp_path / 'LIP'
    _pair(root / layout[0], root / layout[1], '100034_483681',
          np.array([[0, 14], [15, 19]]), '.jpg')
    ds = DATASETS.build(dict(type='LIPBodyPartDataset', data_root=str(root),
                             split='val', pipeline=LOAD))
    assert len(ds) == 1 and len(ds.metainfo['classes']) == 20
    assert ds.metainfo['classes'][14] == 'Left-arm'
    np.testing.assert_array_equal(ds[0]['gt_seg_map'], [[0, 14], [15, 19]])
    with pytest.raises(FileNotFoundError, match='no known folder layout'):
        DATASETS.build(dict(type='LIPBodyPartDataset', data_root=str(root),
                            split='train'))


@pytest.mark.slow
def test_cihp_layout(tmp_path):
    root = tmp_path / 'instance-level_human_parsing'
    _pair(root / 'Training' / 'Images', root / 'Training' / 'Category_ids',
          '0000006', np.array([[0, 2], [13, 5]]), '.jpg')
    ds = DATASETS.build(dict(type='CIHPBodyPartDataset', data_root=str(root),
                             split='train', pipeline=LOAD))
    assert len(ds) == 1
    assert ds.metainfo['classes'] == tuple(
        load_body_part_classes('lip_cihp_20')['classes'])
    np.testing.assert_array_equal(ds[0]['gt_seg_map'], [[0, 2], [13, 5]])
    # the parent folder works too
    parent = DATASETS.build(dict(type='CIHPBodyPartDataset',
                                 data_root=str(tmp_path), split='train'))
    assert len(parent) == 1
    with pytest.raises(ValueError, match='unknown split'):
        DATASETS.build(dict(type='CIHPBodyPartDataset', data_root=str(root),
                            split='test'))
