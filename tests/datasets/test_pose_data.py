"""Goliath metainfo, GoliathDataset and the pose data configs on generated
data."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope
from mmpose.datasets.datasets.utils import parse_pose_metainfo
from mmpose.registry import DATASETS

from sapiens_mm.datasets import (GOLIATH_GROUPS, GoliathDataset,
                                 coco_wholebody_to_goliath,
                                 goliath_keypoint_groups,
                                 goliath_keypoints_from_annotation,
                                 goliath_metainfo, load_goliath_keypoints)

ROOT = Path(__file__).resolve().parents[2]
POSE = ROOT / 'configs' / 'pose'


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny tensors: one thread avoids OpenMP barrier waits on a busy CPU."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _mmpose_scope():
    """Build pipelines in the mmpose scope, as the Runner does."""
    with DefaultScope.overwrite_default_scope('mmpose'):
        yield


def stock_meta(name):
    """mmpose's own metainfo file (shipped in the mmpose package)."""
    return parse_pose_metainfo(
        dict(from_file=f'configs/_base_/datasets/{name}.py'))


@pytest.fixture(scope='module')
def synthetic(tmp_path_factory):
    from sapiens_mm.datasets.synthetic import write_dataset
    out = tmp_path_factory.mktemp('pose_synth')
    write_dataset(out, num_train=3, num_val=2, seed=0, size=(256, 192),
                  progress=False)
    return out


def test_metainfo_is_package_data(tmp_path, monkeypatch):
    load_goliath_keypoints.cache_clear()
    monkeypatch.chdir(tmp_path)  # nothing may be read from the cwd
    meta = parse_pose_metainfo(goliath_metainfo())
    assert meta['dataset_name'] == 'goliath'
    assert meta['num_keypoints'] == 308
    assert len(meta['sigmas']) == 308
    assert len(meta['dataset_keypoint_weights']) == 308
    assert meta['num_skeleton_links'] == 65
    # 146 left/right pairs (mmpose lists each in both orders)
    assert len({frozenset(p) for p in meta['flip_pairs']}) == 146
    assert GoliathDataset.METAINFO == goliath_metainfo()
    built = GoliathDataset(lazy_init=True)
    assert built.metainfo['num_keypoints'] == 308


def _side(name):
    tokens = name.split('_')
    if 'left' in tokens or 'l' in tokens:
        return 'L'
    if 'right' in tokens or 'r' in tokens:
        return 'R'
    return 'M'


def test_flip_indices_are_an_involution_pairing_left_and_right():
    meta = parse_pose_metainfo(goliath_metainfo())
    flip = meta['flip_indices']
    names = [meta['keypoint_id2name'][i] for i in range(308)]
    assert sorted(flip) == list(range(308))
    assert all(flip[flip[i]] == i for i in range(308))
    for i, name in enumerate(names):
        twin = names[flip[i]]
        if name.startswith('left_'):
            assert twin == 'right_' + name[len('left_'):]
        if name.startswith('right_'):
            assert twin == 'left_' + name[len('right_'):]
        # face points (l_/r_ names) mirror to the other side, midline
        # points (nose, neck, lips, ...) stay on the midline
        assert {'L': 'R', 'R': 'L', 'M': 'M'}[_side(name)] == _side(twin)
    assert names[flip[names.index('nose')]] == 'nose'
    assert sum(f == i for i, f in enumerate(flip)) == 308 - 2 * 146


def test_keypoint_groups():
    groups = goliath_keypoint_groups()
    assert tuple(groups) == GOLIATH_GROUPS
    assert {k: len(v) for k, v in groups.items()} == dict(
        body=17, foot=6, face=238, left_hand=20, right_hand=20, extra=7)
    flat = sorted(i for v in groups.values() for i in v)
    assert flat == list(range(308))  # disjoint and complete
    names = parse_pose_metainfo(goliath_metainfo())['keypoint_id2name']
    coco = stock_meta('coco')['keypoint_id2name']
    # the body group is the COCO-17 skeleton, in COCO order
    assert [names[i] for i in groups['body']] == [coco[i] for i in range(17)]


def test_coco_wholebody_mapping_pairs_the_same_points():
    pairs = coco_wholebody_to_goliath()
    assert pairs.shape == (53, 2)
    wb = stock_meta('coco_wholebody')['keypoint_id2name']
    gol = parse_pose_metainfo(goliath_metainfo())['keypoint_id2name']
    for w, g in pairs:
        a, b = wb[int(w)], gol[int(g)]
        # body and feet share names; fingers differ only in numbering
        # style (COCO-WB 'left_thumb2' is Goliath 'left_thumb2', ...)
        assert a.split('_')[0] == b.split('_')[0], (a, b)
        assert a.rstrip('0123456789') == b.rstrip('0123456789') or \
            a.replace('finger', '') == b.replace('finger', ''), (a, b)
    assert len(set(pairs[:, 0])) == len(set(pairs[:, 1])) == 53


def _as_wholebody(ann308):
    """A COCO-WholeBody annotation holding the 53 shared points of a Goliath
    annotation (and nothing on the face)."""
    k308 = np.asarray(ann308['keypoints'], float).reshape(308, 3)
    k133 = np.zeros((133, 3))
    pairs = coco_wholebody_to_goliath()
    k133[pairs[:, 0]] = k308[pairs[:, 1]]
    cuts = dict(keypoints=(0, 17), foot_kpts=(17, 23), face_kpts=(23, 91),
                lefthand_kpts=(91, 112), righthand_kpts=(112, 133))
    ann = {k: v for k, v in ann308.items() if k != 'keypoints'}
    for field, (s, e) in cuts.items():
        ann[field] = k133[s:e].reshape(-1).tolist()
    ann['num_keypoints'] = int((k133[:17, 2] > 0).sum())
    return ann


def test_keypoints_from_annotation_formats():
    rng = np.random.default_rng(0)
    k = np.concatenate([rng.uniform(0, 100, (308, 2)),
                        rng.integers(0, 3, (308, 1))], 1)
    ann = dict(id=7, keypoints=k.reshape(-1).tolist())
    np.testing.assert_array_equal(goliath_keypoints_from_annotation(ann), k)
    got = goliath_keypoints_from_annotation(_as_wholebody(ann))
    shared = coco_wholebody_to_goliath()[:, 1]
    np.testing.assert_array_equal(got[shared], k[shared])
    others = np.setdiff1d(np.arange(308), shared)
    assert not got[others].any()
    with pytest.raises(ValueError, match='924'):
        goliath_keypoints_from_annotation(dict(id=1, keypoints=[0.] * 51))


def _dataset_cfg(config, split_cfg, root, **overrides):
    cfg = Config.fromfile(str(POSE / config))
    ds = cfg[split_cfg].dataset
    ds.data_root = str(root)
    ds.update(overrides)
    return ds


@pytest.mark.slow
def test_goliath_dataset_reads_generated_data(synthetic):
    ds = DATASETS.build(_dataset_cfg(
        'goliath/sapiens_tiny-210e_goliath-256x192.py', 'train_dataloader',
        synthetic))
    anns = json.loads(
        (synthetic / 'train/annotations/goliath_308.json').read_text())
    labelled = [a for a in anns['annotations'] if a['num_keypoints'] > 0]
    assert len(ds) == len(labelled) > 0
    info = ds.get_data_info(0)
    assert info['keypoints'].shape == (1, 308, 2)
    np.testing.assert_allclose(
        info['keypoints'][0],
        np.asarray(labelled[0]['keypoints']).reshape(308, 3)[:, :2])
    assert len(info['flip_indices']) == 308
    sample = ds[0]  # the tiny config's train pipeline
    assert tuple(sample['inputs'].shape) == (3, 256, 192)
    ds_sample = sample['data_samples']
    assert tuple(ds_sample.gt_fields.heatmaps.shape) == (308, 64, 48)
    weights = ds_sample.gt_instance_labels.keypoint_weights
    assert tuple(weights.shape) == (1, 308)
    val = DATASETS.build(_dataset_cfg(
        'goliath/sapiens_tiny-210e_goliath-256x192.py', 'val_dataloader',
        synthetic))
    assert tuple(val[0]['inputs'].shape) == (3, 256, 192)


@pytest.mark.slow
def test_full_size_pipelines_on_generated_data(synthetic):
    """The released-size configs crop to 1024x768 and train on 256x192
    UDP heatmaps (sigma 6) of all 308 keypoints."""
    cfg = 'goliath/sapiens_0.3b-210e_goliath-1024x768.py'
    ds = DATASETS.build(_dataset_cfg(cfg, 'train_dataloader', synthetic))
    sample = ds[0]
    assert tuple(sample['inputs'].shape) == (3, 1024, 768)
    heatmaps = sample['data_samples'].gt_fields.heatmaps
    assert tuple(heatmaps.shape) == (308, 256, 192)
    assert float(heatmaps.max()) == pytest.approx(1.0, abs=0.05)
    val = DATASETS.build(_dataset_cfg(cfg, 'val_dataloader', synthetic))
    packed = val[0]
    assert tuple(packed['inputs'].shape) == (3, 1024, 768)
    assert packed['data_samples'].metainfo['input_size'] == (768, 1024)


def test_stock_coco_dataset_reads_generated_coco17(synthetic):
    ds = DATASETS.build(_dataset_cfg(
        'coco/sapiens_tiny-210e_coco-256x192.py', 'train_dataloader',
        synthetic, ann_file='train/annotations/coco_17.json',
        data_prefix=dict(img='train/images/')))
    assert len(ds) > 0 and ds.metainfo['num_keypoints'] == 17
    heatmaps = ds[0]['data_samples'].gt_fields.heatmaps
    assert tuple(heatmaps.shape) == (17, 64, 48)


def test_goliath_dataset_reads_coco_wholebody_annotations(synthetic,
                                                          tmp_path):
    doc = json.loads(
        (synthetic / 'train/annotations/goliath_308.json').read_text())
    doc['annotations'] = [_as_wholebody(a) for a in doc['annotations']]
    (tmp_path / 'wb.json').write_text(json.dumps(doc))
    ds = GoliathDataset(
        ann_file=str(tmp_path / 'wb.json'),
        data_prefix=dict(img=str(synthetic / 'train/images')))
    shared = coco_wholebody_to_goliath()[:, 1]
    for i in range(len(ds)):
        info = ds.get_data_info(i)
        vis = info['keypoints_visible'][0]
        assert vis.shape == (308, ) and not np.delete(vis, shared).any()
        assert info['raw_ann_info']['num_keypoints'] == int(vis.sum())


def test_goliath_dataset_rejects_other_layouts(synthetic):
    with pytest.raises(ValueError, match='924'):
        GoliathDataset(
            ann_file=str(synthetic / 'train/annotations/coco_17.json'),
            data_prefix=dict(img=str(synthetic / 'train/images')))
