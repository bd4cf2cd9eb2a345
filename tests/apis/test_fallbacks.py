"""What the inferencer falls back to is said, once per call: no person
found (the whole image used, or no pose with whole_image_fallback=False),
every keypoint below kpt_thr (with a threshold that draws them, and the
drawing uses the threshold named). Boxes go in and out as x1, y1, x2, y2,
and the pose JSON says so."""
import json
from pathlib import Path

import numpy as np
import pytest
from inference_helpers import small_cfg
from log_helpers import logged_warnings
from sapiens_mm.apis import SapiensInferencer

ROOT = Path(__file__).resolve().parents[2]
COCO_TINY = ROOT / 'configs/pose/coco/sapiens_tiny-210e_coco-256x192.py'


def _pose_cfg():
    """The tiny COCO-17 pose model at a 64 x 48 input (fast)."""
    return small_cfg('pose', path=COCO_TINY)


@pytest.fixture
def logged():
    """The warnings the inferencer logs during the test."""
    with logged_warnings() as messages:
        yield messages


def _blank(seed):
    """A smooth image with no one in it (the HOG detector finds no one)."""
    rng = np.random.default_rng(seed)
    img = np.full((96, 72, 3), 120, np.uint8)
    img += rng.integers(0, 8, img.shape, dtype=np.uint8)
    return img


def test_no_person_said_once_and_the_fallback_can_be_off(logged):
    inferencer = SapiensInferencer({'pose': _pose_cfg()}, device='cpu',
                                   detector='hog')
    results = inferencer([_blank(0), _blank(1)], show_progress=False)
    assert [r['predictions']['pose']['bbox_source'] for r in results] == [
        'whole_image'] * 2
    said = [m for m in logged if 'found no one' in m]
    assert len(said) == 1  # two images, said once
    assert 'whole image' in said[0] and 'whole_image_fallback=False' in \
        said[0] and '--no-whole-image-fallback' in said[0]
    # the next call says it again (once per run)
    inferencer(_blank(2), show_progress=False)
    assert len([m for m in logged if 'found no one' in m]) == 2

    off = SapiensInferencer({'pose': _pose_cfg()}, device='cpu',
                            detector='hog', whole_image_fallback=False)
    (res, ) = off(_blank(0), show_progress=False)
    pose = res['predictions']['pose']
    assert pose['bbox_source'] == 'none' and pose['bboxes'].shape == (0, 4)
    assert pose['keypoints'].shape == (0, 17, 2)
    # no detector: the whole image is the user's choice, nothing to say
    logged.clear()
    SapiensInferencer({'pose': _pose_cfg()}, device='cpu',
                      detector='none')(_blank(0), show_progress=False)
    assert not [m for m in logged if 'found no one' in m]


def test_keypoints_below_the_threshold_are_said_with_one_that_draws(
        logged, tmp_path):
    import torch

    from sapiens_mm.apis.inference import init_model
    cfg = _pose_cfg()
    torch.save(dict(state_dict=init_model(cfg).state_dict()),
               str(tmp_path / 'pose.pth'))
    model = dict(config=cfg, checkpoint=str(tmp_path / 'pose.pth'))
    box = [np.array([[10., 12., 60., 90.]])]
    strict = SapiensInferencer({'pose': model}, device='cpu',
                               detector='none', kpt_thr=1.01)
    img = _blank(3)
    (res, ) = strict(img, bboxes=box, return_vis=True, show_progress=False)
    scores = res['predictions']['pose']['keypoint_scores']
    (said, ) = [m for m in logged if 'below the drawing threshold' in m]
    suggest = np.floor(np.median(scores) * 100) / 100
    assert f'kpt_thr={suggest:g}' in said and f'--kpt-thr {suggest:g}' in said
    assert f'highest {scores.max():.2f}' in said
    # nothing but the box is drawn at kpt_thr=1.01 ...
    vis = res['visualization']['pose']
    plain = SapiensInferencer({'pose': model}, device='cpu',
                              detector='none', kpt_thr=1.01)
    (nobox, ) = plain(img, bboxes=box, return_vis=True, draw_bbox=False,
                      show_progress=False)
    # (the picture above its caption)
    np.testing.assert_array_equal(
        nobox['visualization']['pose'][:img.shape[0]], img)
    # ... the suggested threshold draws about half the keypoints
    logged.clear()
    drawn = SapiensInferencer({'pose': model}, device='cpu',
                              detector='none', kpt_thr=float(suggest))
    (res2, ) = drawn(img, bboxes=box, return_vis=True, draw_bbox=False,
                     show_progress=False)
    assert not np.array_equal(res2['visualization']['pose'], img)
    assert not [m for m in logged if 'below the drawing threshold' in m]
    assert (scores >= suggest).mean() >= 0.5
    assert vis.shape[1:] == img.shape[1:] and vis.shape[0] > img.shape[0]


def test_boxes_are_xyxy_in_and_out_and_the_json_says_so(tmp_path):
    inferencer = SapiensInferencer({'pose': _pose_cfg()}, device='cpu',
                                   detector='none')
    (res, ) = inferencer(_blank(4), bboxes=[np.array([[10, 12, 60, 90]])],
                         out_dir=str(tmp_path), show_progress=False)
    np.testing.assert_array_equal(res['predictions']['pose']['bboxes'],
                                  [[10, 12, 60, 90]])
    record = json.loads(open(res['pred_files']['pose']).read())
    assert record['bbox_format'] == 'xyxy'
    assert record['instances'][0]['bbox'] == [10, 12, 60, 90]
