"""SapiensInferencer / CLI outputs: keypoint export formats,
ControlNet-style skeleton images and the person foreground (soft mask,
RGBA cut-outs). Tiny configs at 64x48 with random weights."""
import json

import cv2
import numpy as np
import pytest
import torch
from scipy.special import softmax
from inference_helpers import write_video as _write_video, image, small_cfg

from sapiens_mm.apis import SapiensInferencer
from sapiens_mm.cli.infer import main
from sapiens_mm.datasets.metainfo import load_goliath_keypoints

GOLIATH = [k['name'] for k in load_goliath_keypoints()['keypoints']]
BOXES = [[4, 6, 40, 66], [20, 10, 48, 60]]


@pytest.fixture(scope='module')
def inferencer():
    torch.manual_seed(0)
    return SapiensInferencer(models={t: small_cfg(t) for t in ('pose', 'seg')},
                             device='cpu', detector='none', kpt_thr=0.0)


def test_exports_skeleton_and_mask(inferencer, tmp_path):
    img = image(70, 50, 3)
    cv2.imwrite(str(tmp_path / 'p.png'), img)
    (res, ) = inferencer(str(tmp_path / 'p.png'), out_dir=str(tmp_path / 'o'),
                         bboxes=BOXES, return_vis=True,
                         return_datasamples=True, show_progress=False,
                         skeleton_style='openpose',
                         export_formats=['coco17', 'coco_wholebody',
                                         'openpose'], save_mask=True)
    out = tmp_path / 'o'
    pose = res['predictions']['pose']
    kpts, scores = pose['keypoints'], pose['keypoint_scores']
    assert kpts.shape == (2, 308, 2)
    # COCO-17: by name from the 308 predictions (wrists are Goliath 62 / 41)
    coco = json.loads((out / 'pose_coco17/p.json').read_text())
    assert res['pred_files']['pose_coco17'] == str(out / 'pose_coco17/p.json')
    assert coco['num_keypoints'] == 17 and len(coco['instances']) == 2
    flat = np.asarray(coco['instances'][1]['keypoints']).reshape(17, 3)
    np.testing.assert_allclose(flat[9], [*kpts[1, 62], scores[1, 62]],
                               rtol=1e-5)
    np.testing.assert_allclose(flat[10], [*kpts[1, 41], scores[1, 41]],
                               rtol=1e-5)
    wb = json.loads((out / 'pose_coco_wholebody/p.json').read_text())
    flat = np.asarray(wb['instances'][0]['keypoints']).reshape(133, 3)
    assert (flat[23] == 0).all()  # face-0 (jaw line) is missing in Goliath
    op = json.loads((out / 'pose_openpose/p.json').read_text())
    assert (op['canvas_width'], op['canvas_height']) == (50, 70)
    body = np.asarray(op['people'][0]['pose_keypoints_2d']).reshape(18, 3)
    neck = GOLIATH.index('neck')
    np.testing.assert_allclose(body[1], [*kpts[0, neck], scores[0, neck]],
                               rtol=1e-5)
    # ControlNet-style drawing: black canvas (no photo under it)
    vis = res['visualization']['pose']
    assert vis.shape == img.shape
    assert (vis == 0).all(-1).mean() > 0.3 and vis.any()
    assert np.abs(vis.astype(int) - img).mean() > 30
    # foreground: 1 - P(background) from the seg logits (scipy reference)
    logits = res['datasamples']['seg'].seg_logits.data.numpy()
    alpha = 1 - softmax(logits.astype(np.float64), axis=0)[0]
    np.testing.assert_allclose(res['predictions']['foreground'], alpha,
                               atol=1e-5)
    mask = cv2.imread(str(out / 'mask/p.png'), cv2.IMREAD_UNCHANGED)
    assert np.abs(mask.astype(int) - np.round(alpha * 255)).max() <= 1
    rgba = cv2.imread(str(out / 'mask/p_rgba.png'), cv2.IMREAD_UNCHANGED)
    assert rgba.shape == (70, 50, 4)
    np.testing.assert_array_equal(rgba[..., :3], img)
    np.testing.assert_array_equal(rgba[..., 3], mask)
    # one cut-out per person box: the box's pixels of the RGBA image
    boxes = np.round(pose['bboxes']).astype(int)
    for i, (x1, y1, x2, y2) in enumerate(boxes):
        cut = cv2.imread(str(out / f'mask/p_person{i}.png'),
                         cv2.IMREAD_UNCHANGED)
        np.testing.assert_array_equal(cut, rgba[y1:y2, x1:x2])


def test_bad_output_options(inferencer):
    img = image(30, 20, 0)
    with pytest.raises(ValueError, match='skeleton_style must be one of'):
        inferencer(img, skeleton_style='controlnet')
    with pytest.raises(ValueError, match="Unknown export format.*'coco18'"):
        inferencer(img, export_formats=['coco18'])
    with pytest.raises(TypeError, match=r"list of formats.*\['openpose'\]"):
        inferencer(img, export_formats='openpose')
    depth_only = SapiensInferencer(models={'depth': small_cfg('depth')},
                                   device='cpu')
    with pytest.raises(ValueError, match='needs a pose model'):
        depth_only(img, export_formats=['coco17'])
    with pytest.raises(ValueError, match='give a seg model too'):
        depth_only(img, save_mask=True)


def test_cli_options(tmp_path):
    for task in ('pose', 'seg'):
        small_cfg(task).dump(str(tmp_path / f'{task}.py'))
    cv2.imwrite(str(tmp_path / 'a.png'), image(40, 30, 1))
    (summary, ) = main([
        str(tmp_path / 'a.png'), '--pose-config', str(tmp_path / 'pose.py'),
        '--seg-config', str(tmp_path / 'seg.py'), '--detector', 'none',
        '--out-dir', str(tmp_path / 'out'), '--no-progress', '--device',
        'cpu', '--export-format', 'openpose', 'coco17', '--skeleton-style',
        'openpose', '--save-mask'
    ])
    out = tmp_path / 'out'
    assert summary['pred_files']['pose_openpose'] == str(
        out / 'pose_openpose/a.json')
    assert (out / 'pose_coco17/a.json').is_file()
    assert {'mask', 'mask_rgba', 'mask_person0'} <= set(summary['pred_files'])
    # the whole image is the one person box
    assert cv2.imread(str(out / 'mask/a_person0.png'),
                      cv2.IMREAD_UNCHANGED).shape == (40, 30, 4)
    assert cv2.imread(str(out / 'pose/a.png')).shape == (40, 30, 3)


def test_video_exports_and_masks(inferencer, tmp_path):
    """Per-frame export files and masks; OpenPose person_id = track ID."""
    _write_video(tmp_path / 'clip.mp4', 3)
    out = tmp_path / 'out'
    results = inferencer(str(tmp_path / 'clip.mp4'), out_dir=str(out),
                         bboxes=BOXES, show_progress=False,
                         export_formats=['openpose'], save_mask=True,
                         skeleton_style='openpose')
    assert len(results) == 3
    assert sorted(p.name for p in (out / 'pose_openpose/clip').iterdir()) \
        == [f'{i:06d}.json' for i in range(3)]
    assert (out / 'mask/clip/000002_rgba.png').is_file()
    assert (out / 'mask/clip/000002_person1.png').is_file()
    for i, res in enumerate(results):
        record = json.loads(
            (out / f'pose/clip/{i:06d}.json').read_text())
        doc = json.loads((out / f'pose_openpose/clip/{i:06d}.json')
                         .read_text())
        ids = [inst['track_id'] for inst in record['instances']]
        assert [p['person_id'] for p in doc['people']] == [[t] for t in ids]
        if i == 0:
            first = ids
    assert sorted(first) == [0, 1] and ids == first  # two stable tracks
    assert (out / 'pose/clip.mp4').is_file()
