"""Official Sapiens checkpoints carry no ``dataset_meta`` (Sapiens2's
safetensors no ``meta`` at all). Read through mmengine's loader inside
:func:`sapiens_mm.zoo.safe_checkpoint_loading` (which routes local files
through sapiens_mm's safe reader), they get the metadata of their shipped
config, so the stock front ends name the body parts instead of
falling back to Cityscapes (``MMSegInferencer``) or failing on the missing
``meta`` (``mmseg.apis.init_model``).

The files are written here the way the official ones are laid out: v1
``{'state_dict', 'meta'}`` with a meta of epoch / iteration only, Sapiens2 a
flat safetensors file. Random weights of the tiny archs; the names are the
official naming scheme.
"""
import warnings

import numpy as np
import pytest
import torch
from mmengine.runner import CheckpointLoader
from tiny_configs import ROOT, TINY

from sapiens_mm.apis import init_model
from sapiens_mm.checkpoint.safetensors_io import save_safetensors
from sapiens_mm.zoo import safe_checkpoint_loading


@pytest.fixture(autouse=True)
def _safe_loading():
    with safe_checkpoint_loading():
        yield


def load(path):
    """What mmengine's checkpoint loader returns for a local file."""
    return CheckpointLoader.load_checkpoint(path, map_location='cpu')


# Independent of the package's loader: the first and last Goliath part names
# and the vocabulary sizes as the Sapiens release documents them.
GOLIATH_FIRST_LAST = ('Background', 'Tongue')
SAPIENS2_SEG = ROOT / 'configs/sapiens2/seg/sapiens2_tiny-dome29-256x192.py'


def _official_v1(task, path):
    torch.manual_seed(0)
    model = init_model(str(TINY[task]))
    torch.save(dict(state_dict=model.state_dict(),
                    meta=dict(epoch=194, iter=1000)), path)
    return str(path)


@pytest.fixture(scope='module')
def photo():
    rng = np.random.default_rng(5)
    return rng.integers(0, 256, (64, 48, 3), dtype=np.uint8)


def _no_cityscapes(record):
    texts = [str(w.message) for w in record]
    assert not [t for t in texts if 'Cityscapes' in t or 'cityscapes' in t
                ], texts


@pytest.mark.parametrize('name', [
    'sapiens_tiny_goliath_best_goliath_mIoU_7673_epoch_194.pth',
    'renamed_seg.pth',  # recognised by its weights (28-class head)
])
def test_stock_mmseg_inferencer_names_the_goliath_parts(tmp_path, name, photo):
    from mmseg.apis import MMSegInferencer
    path = _official_v1('seg', tmp_path / name)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter('always')
        inferencer = MMSegInferencer(str(TINY['seg']), path, device='cpu')
    _no_cityscapes(record)
    result = inferencer(photo, return_vis=True)
    assert result['predictions'].shape == photo.shape[:2]
    # the visualiser takes the model's metadata when it draws
    for meta in (inferencer.model.dataset_meta,
                 inferencer.visualizer.dataset_meta):
        classes = list(meta['classes'])
        assert len(classes) == 28 and len(meta['palette']) == 28
        assert (classes[0], classes[-1]) == GOLIATH_FIRST_LAST


def test_stock_mmseg_init_model_on_official_sapiens2_safetensors(tmp_path,
                                                                  photo):
    """A flat Sapiens2 file: before, ``init_model`` raised KeyError 'meta'."""
    from mmseg.apis import inference_model
    from mmseg.apis import init_model as mmseg_init_model
    torch.manual_seed(0)
    model = init_model(str(SAPIENS2_SEG))
    path = tmp_path / 'sapiens2_tiny_seg.safetensors'
    save_safetensors(model.state_dict(), str(path))
    stock = mmseg_init_model(str(SAPIENS2_SEG), str(path), device='cpu')
    assert stock.dataset_meta['vocab'] == 'dome_29'
    assert len(stock.dataset_meta['classes']) == 29
    # the weights arrived: the same labels as our builder on the same file
    ours = init_model(str(SAPIENS2_SEG), str(path))
    from sapiens_mm.apis import SapiensInferencer
    expected = SapiensInferencer({'seg': (str(SAPIENS2_SEG), str(path))},
                                 device='cpu')(photo, show_progress=False)
    got = inference_model(stock, photo).pred_sem_seg.data[0].numpy()
    np.testing.assert_array_equal(got, expected[0]['predictions']['seg'])
    assert ours.dataset_meta['classes'] == stock.dataset_meta['classes']


def test_stock_mmseg_init_model_on_official_depth(tmp_path, photo):
    """v1 depth: ``init_model`` used to warn and look for a dataset with
    ``num_classes`` classes; now the meta says the task."""
    from mmseg.apis import init_model as mmseg_init_model
    path = _official_v1('depth',
                        tmp_path / 'sapiens_tiny_render_people_epoch_100.pth')
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter('always')
        stock = mmseg_init_model(str(TINY['depth']), path, device='cpu')
    assert not [w for w in record if 'dataset_meta' in str(w.message)]
    assert stock.dataset_meta == {'task': 'depth'}


def test_other_checkpoints_come_back_unchanged(tmp_path):
    """A file that is no Sapiens task model, one that has its own
    dataset_meta and a backbone-only pretraining file are returned as
    read."""
    other = dict(state_dict={'conv.weight': torch.ones(2, 2)},
                 meta=dict(epoch=1))
    torch.save(other, tmp_path / 'detector.pth')
    loaded = load(str(tmp_path / 'detector.pth'))
    assert set(loaded['meta']) == {'epoch'}
    own = dict(state_dict=init_model(str(TINY['seg'])).state_dict(),
               meta=dict(dataset_meta=dict(classes=('a', 'b'))))
    own_path = tmp_path / 'sapiens_tiny_goliath_best_goliath_mIoU_1.pth'
    torch.save(own, own_path)
    assert load(str(own_path))['meta']['dataset_meta'] == dict(
        classes=('a', 'b'))
    backbone = {
        k[len('backbone.'):]: v
        for k, v in own['state_dict'].items() if k.startswith('backbone.')
    }
    torch.save(backbone, tmp_path / 'sapiens_tiny_epoch_1600_clean.pth')
    loaded = load(str(tmp_path / 'sapiens_tiny_epoch_1600_clean.pth'))
    assert 'meta' not in loaded and set(loaded) == set(backbone)


def test_stock_mmpose_inferencer_on_an_official_pose_file(tmp_path, photo):
    """The added pose metadata is what mmpose itself makes of the config:
    the stock inferencer draws and returns 308 named keypoints."""
    from mmpose.apis import MMPoseInferencer
    from mmpose.apis import init_model as mmpose_init_model
    path = _official_v1('pose',
                        tmp_path / 'sapiens_tiny_goliath_best_goliath_AP_1.pth')
    added = mmpose_init_model(str(TINY['pose']), path, device='cpu')
    plain = mmpose_init_model(str(TINY['pose']), None, device='cpu')
    # mmpose's own reading of the config's metainfo is the reference
    for key in ('dataset_name', 'num_keypoints', 'keypoint_id2name',
                'flip_indices', 'skeleton_links'):
        assert added.dataset_meta[key] == plain.dataset_meta[key], key
    np.testing.assert_array_equal(added.dataset_meta['sigmas'],
                                  plain.dataset_meta['sigmas'])
    result = next(MMPoseInferencer(pose2d=str(TINY['pose']),
                                   pose2d_weights=path, device='cpu',
                                   det_model='whole_image')(
                                       photo, return_vis=True))
    assert np.asarray(result['predictions'][0][0]['keypoints']).shape == (
        308, 2)
    assert result['visualization'][0].shape == photo.shape
