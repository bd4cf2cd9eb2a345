"""Sapiens2 task models in SapiensInferencer and tools/infer.py, next to a
v1 model: official file names recognised, pointmaps written as .npy and a
coloured .ply, the seg-29 drawing with its legend."""
import subprocess
import sys

import cv2
import numpy as np
import pytest
import torch
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


def test_sapiens2_pose_runs(checkpoints):
    inferencer = SapiensInferencer(models=[checkpoints['pose']],
                                   device='cpu', detector='none')
    [result] = list(inferencer([person_image()]))
    assert result['predictions']['pose']['keypoints'].shape == (1, 308, 2)


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
