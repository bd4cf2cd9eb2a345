"""Folder datasets read the synthetic generator's layout directly."""
from pathlib import Path

import cv2
import numpy as np
import pytest
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmseg.registry import DATASETS

from sapiens_mm.datasets.synthetic import write_dataset

ROOT = Path(__file__).resolve().parents[2]
LOAD = [dict(type='LoadImageFromFile'), dict(type='LoadDenseAnnotations')]


@pytest.fixture(scope='module')
def synthetic(tmp_path_factory):
    root = tmp_path_factory.mktemp('synthetic')
    write_dataset(root, num_train=2, num_val=1, seed=0, size=(64, 48),
                  progress=False)
    return root


@pytest.fixture(autouse=True)
def _scope():
    init_default_scope('mmseg')


def test_depth_dataset_reads_generator_output(synthetic):
    ds = DATASETS.build(dict(
        type='DepthFolderDataset', data_root=str(synthetic),
        data_prefix=dict(img_path='train/images', mask_path='train/masks',
                         depth_path='train/depths'),
        pipeline=LOAD))
    assert len(ds) == 2
    for i in range(2):
        info = ds.get_data_info(i)
        assert 'normal_path' not in info
        out = ds[i]
        mask = cv2.imread(info['mask_path'], cv2.IMREAD_UNCHANGED)
        depth = np.load(info['depth_path'])
        np.testing.assert_array_equal(out['gt_fg_mask'], mask > 0)
        np.testing.assert_array_equal(out['gt_depth_map'], depth)
        assert out['img'].shape == (64, 48, 3)
        assert out['gt_fg_mask'].any()


def test_normal_dataset_reads_generator_output(synthetic):
    ds = DATASETS.build(dict(
        type='NormalFolderDataset', data_root=str(synthetic / 'val'),
        pipeline=LOAD))  # default prefixes: images / masks / normals
    assert len(ds) == 1
    out = ds[0]
    np.testing.assert_array_equal(out['gt_normal_map'],
                                  np.load(ds.get_data_info(0)['normal_path']))
    assert out['gt_normal_map'].shape == (64, 48, 3)


@pytest.mark.parametrize('task', ['depth', 'normal'])
def test_config_pipelines_on_generator_output(synthetic, task):
    cfg = Config.fromfile(str(
        ROOT / f'configs/{task}/sapiens_tiny-200e_{task}_folder-256x192.py'))
    key = f'gt_{task}_map'
    for loader, size in ((cfg.train_dataloader, (256, 192)),
                         (cfg.val_dataloader, (64, 48))):
        loader.dataset.data_root = str(synthetic)
        out = DATASETS.build(loader.dataset)[0]
        assert out['inputs'].shape == (3, 256, 192)
        target = out['data_samples'].get(key).data
        # training targets at the input size, evaluation targets at the
        # original size (predictions are returned there)
        assert target.shape == ((1, ) if task == 'depth' else (3, )) + size
        if task == 'depth':
            values = target[target != -1]
            if loader is cfg.train_dataloader:
                assert values.min() >= 0 and values.max() <= 1
            else:
                assert values.min() > 0  # raw camera z on the foreground
        else:
            norms = target.norm(dim=0)
            assert ((norms - 1).abs() < 1e-5).sum() + (norms == 0).sum() \
                == norms.numel()


def test_missing_files_and_bad_prefixes_are_explained(synthetic, tmp_path):
    (tmp_path / 'images').mkdir()
    (tmp_path / 'depths').mkdir()
    with pytest.raises(FileNotFoundError, match='No image'):
        DATASETS.build(dict(type='DepthFolderDataset', data_root=str(tmp_path),
                            data_prefix=dict(img_path='images',
                                             depth_path='depths')))
    img = cv2.imread(str(next((synthetic / 'train/images').iterdir())))
    cv2.imwrite(str(tmp_path / 'images/p1.png'), img)
    with pytest.raises(FileNotFoundError, match=r'depths/p1\.npy'):
        DATASETS.build(dict(type='DepthFolderDataset', data_root=str(tmp_path),
                            data_prefix=dict(img_path='images',
                                             depth_path='depths')))
    with pytest.raises(FileNotFoundError, match='Image folder not found'):
        DATASETS.build(dict(type='DepthFolderDataset',
                            data_root=str(tmp_path / 'nope')))
    with pytest.raises(ValueError, match='normal_path'):
        DATASETS.build(dict(type='NormalFolderDataset',
                            data_root=str(tmp_path),
                            data_prefix=dict(img_path='images',
                                             depth_path='depths')))
    with pytest.raises(ValueError, match='Unknown data_prefix'):
        DATASETS.build(dict(type='DenseFolderDataset',
                            data_root=str(tmp_path),
                            data_prefix=dict(img_path='images',
                                             seg_map_path='masks')))
