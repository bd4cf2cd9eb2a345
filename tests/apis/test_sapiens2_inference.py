"""Sapiens2 task models in SapiensInferencer and tools/infer.py, next to a
v1 model: official file names recognised, pointmaps written as .npy and a
coloured .ply, the seg-29 drawing with its legend."""
import subprocess
import sys

import cv2
import numpy as np
import pytest
import torch
from inference_helpers import well_posed
from sapiens2_helpers import ROOT, build_tiny

from sapiens_mm.apis import SapiensInferencer
from sapiens_mm.checkpoint.sapiens2_layout import save_official_checkpoint


def person_image(h=120, w=90):
    img = np.full((h, w, 3), 40, np.uint8)
    cv2.ellipse(img, (w // 2, h // 2), (w // 4, h // 3), 0, 0, 360,
                (60, 140, 220), -1)
    return img


@pytest.fixture(scope='module')
def checkpoints(tmp_path_factory):
    """Official-layout Sapiens2 files under their official names (tiny) and
    a v1 tiny depth checkpoint under its official name."""
    out = tmp_path_factory.mktemp('sapiens2_ckpt')
    files = {}
    for task in ('seg', 'pointmap', 'pose'):
        torch.manual_seed(0)
        _, model = build_tiny(task)
        if task == 'pointmap':  # a positive scale
            with torch.no_grad():
                model.decode_head.scale_final_layer[-1].bias += 1.0
        path = out / f'sapiens2_tiny_{task}.safetensors'
        save_official_checkpoint(model, str(path))
        files[task] = str(path)
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmseg.registry import MODELS
    init_default_scope('mmseg')
    cfg = Config.fromfile(
        str(ROOT / 'configs/depth/sapiens_tiny-200e_depth_folder-256x192.py'))
    depth = MODELS.build(cfg.model)
    path = out / 'sapiens_tiny_render_people_epoch_1.pth'
    torch.save(dict(state_dict=depth.state_dict()), path)
    files['depth'] = str(path)
    return files


def test_inferencer_runs_sapiens2_files_next_to_v1(checkpoints, tmp_path):
    inferencer = SapiensInferencer(
        models=[checkpoints['seg'], checkpoints['pointmap'],
                checkpoints['depth']], device='cpu', detector='none')
    infos = inferencer.model_infos
    assert (infos['seg'].version, infos['pointmap'].version,
            infos['depth'].version) == (2, 2, 1)
    img = person_image()
    [result] = list(inferencer([img], out_dir=str(tmp_path)))
    pred = result['predictions']
    seg, points = pred['seg'], pred['pointmap']
    assert seg.shape == (120, 90) and seg.max() < 29
    assert points.shape == (120, 90, 3) and points.dtype == np.float32
    fg = seg > 0
    # outside the seg foreground the pointmap is NaN, inside finite
    assert np.isnan(points[~fg]).all() and np.isfinite(points[fg]).all()
    saved = np.load(result['pred_files']['pointmap'])
    np.testing.assert_array_equal(saved, points)
    ply = result['pred_files']['pointmap_ply']
    with open(ply, 'rb') as f:
        header = f.read(300).split(b'end_header')[0].decode()
    assert f'element vertex {int(fg.sum())}' in header
    assert 'property uchar red' in header
    # seg-29 drawing: image plus the legend panel
    vis = cv2.imread(result['vis_files']['seg'])
    assert vis.shape[0] == 120 and vis.shape[1] > 90
    assert inferencer.task_inferencers['seg'].dataset_meta['vocab'] == \
        'dome_29'


def test_sapiens2_pose_equals_stock_mmpose(checkpoints, monkeypatch):
    """Sapiens2 pose keypoints from the official-layout file alone equal
    those of stock ``mmpose.apis.inference_topdown`` (mmpose's own
    pipeline, Sapiens2 affine and UDP decoding) on the same weights and the
    whole-image box. Heatmaps are made well posed (one clear peak per
    keypoint plus 1 % of the model's output, no flip test), as in the v1
    comparison, so that the 1e-4 px bound tests the geometry rather than
    float32 summation order in nearly flat heatmaps."""
    from mmpose.apis import inference_topdown
    from mmpose.apis import init_model as mmpose_init_model
    from sapiens2_helpers import leaf

    inferencer = SapiensInferencer(models=[checkpoints['pose']],
                                   device='cpu', detector='none')
    ours_model = inferencer.task_inferencers['pose'].model
    stock = mmpose_init_model(str(leaf('pose', 'tiny')), None, device='cpu')
    stock.load_state_dict(ours_model.state_dict())
    well_posed(ours_model, monkeypatch)
    well_posed(stock, monkeypatch)
    img = person_image()
    [result] = list(inferencer([img], show_progress=False))
    ours = result['predictions']['pose']['keypoints']
    h, w = img.shape[:2]
    (sample, ) = inference_topdown(stock, img,
                                   bboxes=np.array([[0, 0, w, h]],
                                                   np.float32))
    np.testing.assert_allclose(ours, sample.pred_instances.keypoints,
                               atol=1e-4, rtol=0)
    assert ours.shape == (1, 308, 2)


@pytest.mark.parametrize('task', ['pointmap', 'albedo'])
def test_sapiens2_dense_maps_equal_stock_mmseg(task, tmp_path):
    """Sapiens2 pointmap / albedo maps from the official-layout file alone
    equal what stock ``mmseg.apis.inference_model`` predicts with the same
    weights (mmseg's own test pipeline and the estimator's predict). The
    bound is float32 rounding of two separately run forwards."""
    from mmseg.apis import inference_model
    from mmseg.apis import init_model as mmseg_init_model
    from sapiens2_helpers import leaf

    torch.manual_seed(1)
    _, model = build_tiny(task)
    with torch.no_grad():  # a positive pointmap scale, visible albedo
        if task == 'pointmap':
            model.decode_head.scale_final_layer[-1].bias += 1.0
    path = tmp_path / f'sapiens2_tiny_{task}.safetensors'
    save_official_checkpoint(model, str(path))
    inferencer = SapiensInferencer(models=[str(path)], device='cpu',
                                   detector='none')
    img = person_image()
    [result] = list(inferencer([img], show_progress=False))
    ours = result['predictions'][task]
    stock = mmseg_init_model(str(leaf(task, 'tiny')), None, device='cpu')
    stock.load_state_dict(model.state_dict())
    sample = inference_model(stock, img)
    field = dict(pointmap='pred_pointmap', albedo='pred_albedo_map')[task]
    theirs = sample.get(field).data.permute(1, 2, 0).numpy()
    assert ours.shape == theirs.shape == (120, 90, 3)
    np.testing.assert_allclose(ours, theirs, atol=1e-5, rtol=1e-5)
    assert np.abs(ours).max() > 1e-3  # not a trivially empty map


@pytest.mark.slow
def test_infer_cli_with_sapiens2_and_v1_checkpoints(checkpoints, tmp_path):
    img = tmp_path / 'person.png'
    cv2.imwrite(str(img), person_image())
    out = tmp_path / 'out'
    proc = subprocess.run(
        [sys.executable, str(ROOT / 'tools/infer.py'), str(img),
         '--checkpoints', checkpoints['seg'], checkpoints['pointmap'],
         checkpoints['depth'], '--out-dir', str(out), '--detector', 'none',
         '--no-progress'],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for rel in ('seg/person.npy', 'pointmap/person.npy',
                'pointmap/person.ply', 'depth/person.npy',
                'pointmap/person.png'):
        assert (out / rel).is_file(), rel
    assert np.load(out / 'pointmap/person.npy').shape == (120, 90, 3)
