"""Pieces of the inferencer: checkpoint recognition (names and keys),
person boxes (NMS, thresholds, fallbacks, OpenCV and mmdet detectors) and
drawing."""
import os

import cv2
import numpy as np
import pytest
import torch
from mmengine.config import Config

from sapiens_mm.apis import SapiensInferencer
from sapiens_mm.tasks import task_of_config
from sapiens_mm.zoo import (UnrecognizedCheckpointError, recognize_checkpoint,
                            recognize_state_dict, shipped_config)
from sapiens_mm.zoo.model_zoo import parse_checkpoint_name
from sapiens_mm.detection.person_detector import (
    MMDetPersonDetector,
    OpenCVPersonDetector,
    PersonDetector,
    build_person_detector,
    filter_boxes,
    nms,
    select_person_boxes,
)
from sapiens_mm.visualization import (
    colorize_depth,
    colorize_normal,
    draw_pose,
    draw_seg,
)
from sapiens_mm.datasets.metainfo import load_body_part_classes


@pytest.fixture(scope='module', autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# ------------------------------------------------------ checkpoint names
OFFICIAL = [
    ('sapiens_0.3b_goliath_best_goliath_AP_573.pth', 'pose', '0.3b',
     'goliath', 308),
    ('sapiens_1b_goliath_best_goliath_AP_639.pth', 'pose', '1b', 'goliath',
     308),
    ('sapiens_1b_coco_wholebody_best_coco_wholebody_AP_727.pth', 'pose', '1b',
     'coco_wholebody', 133),
    ('sapiens_2b_coco_best_coco_AP_822.pth', 'pose', '2b', 'coco', 17),
    ('sapiens_0.3b_goliath_best_goliath_mIoU_7673_epoch_194.pth', 'seg',
     '0.3b', 'goliath', 28),
    ('sapiens_0.6b_goliath_best_goliath_mIoU_7777_epoch_178.pth', 'seg',
     '0.6b', 'goliath', 28),
    ('sapiens_0.3b_render_people_epoch_100.pth', 'depth', '0.3b', None, 1),
    ('sapiens_2b_render_people_epoch_25.pth', 'depth', '2b', None, 1),
    ('sapiens_0.3b_normal_render_people_epoch_66.pth', 'normal', '0.3b', None,
     3),
    ('sapiens_0.6b_normal_render_people_epoch_200.pth', 'normal', '0.6b',
     None, 3),
]


@pytest.mark.parametrize('name,task,size,dataset,channels', OFFICIAL)
def test_official_names_map_to_matching_configs(name, task, size, dataset,
                                                channels):
    info = parse_checkpoint_name(f'/models/{name}')
    assert (info.task, info.size, info.dataset, info.source) == (task, size,
                                                                 dataset,
                                                                 'name')
    cfg = Config.fromfile(str(info.config))
    assert task_of_config(cfg) == task
    assert cfg.model.backbone.arch == f'sapiens_{size}'
    head = cfg.model.get('head') or cfg.model.decode_head
    out = head.get('out_channels', head.get('num_classes'))
    assert out == channels


@pytest.mark.parametrize('name,match', [
    ('sapiens_1b_epoch_173_clean.pth', 'pretraining'),
    ('sapiens_0.3b_epoch_1600.pth', 'pretraining'),
    ('sapiens_0.3b_goliath_best_goliath_AP_573_torchscript.pt2', 'lite'),
    ('sapiens_1b_render_people_epoch_88_bfloat16.pt2', 'lite'),
])
def test_official_names_that_cannot_run(name, match):
    with pytest.raises(UnrecognizedCheckpointError, match=match):
        parse_checkpoint_name(name)


def test_other_names_are_not_guessed():
    assert parse_checkpoint_name('my_model.pth') is None
    assert parse_checkpoint_name('epoch_10.pth') is None


# ------------------------------------------------------- checkpoint keys
def _official_layout(width, head, channels):
    """The keys the recogniser reads, with official names and shapes."""
    state = {
        'backbone.patch_embed.projection.weight': torch.zeros(
            width, 3, 16, 16),
        'backbone.ln1.weight': torch.zeros(width),
    }
    if head == 'pose':
        state['head.final_layer.weight'] = torch.zeros(channels, 8, 1, 1)
    else:
        state['decode_head.conv_seg.weight'] = torch.zeros(channels, 8, 1, 1)
        deconvs = 4 if head == 'depth' else 3
        for i in range(deconvs):
            state[f'decode_head.deconv_layers.{3 * i}.weight'] = torch.zeros(
                1, 1, 1, 1)
    return state


@pytest.mark.parametrize('width,head,channels,expected', [
    (1024, 'pose', 308, ('pose', '0.3b', 'goliath')),
    (1280, 'pose', 17, ('pose', '0.6b', 'coco')),
    (1536, 'pose', 133, ('pose', '1b', 'coco_wholebody')),
    (1920, 'seg', 28, ('seg', '2b', 'goliath')),
    (1024, 'seg', 20, ('seg', '0.3b', 'lip')),
    (1536, 'depth', 1, ('depth', '1b', None)),
    (1280, 'normal', 3, ('normal', '0.6b', None)),
])
def test_renamed_checkpoint_recognised_by_keys(tmp_path, width, head,
                                               channels, expected):
    path = tmp_path / 'renamed.pth'
    torch.save({'state_dict': _official_layout(width, head, channels),
                'meta': {'epoch': 3}}, path)
    info = recognize_checkpoint(path)
    assert (info.task, info.size, info.dataset) == expected
    assert info.source == 'keys'
    assert info.config == shipped_config(*expected)


@pytest.mark.parametrize('state,match', [
    (_official_layout(1000, 'pose', 308), 'width 1000'),
    (_official_layout(1024, 'pose', 21), '21 keypoints'),
    (_official_layout(1024, 'seg', 5), '5 output channels'),
    ({'patch_embed.projection.weight': torch.zeros(1024, 3, 16, 16)},
     'backbone-only'),
    ({'conv.weight': torch.zeros(3)}, 'not a Sapiens task checkpoint'),
    ({'backbone.patch_embed.projection.weight': torch.zeros(1024, 3, 16, 16)},
     'without a known head'),
])
def test_unrecognisable_weights_say_what_to_do(state, match):
    with pytest.raises(UnrecognizedCheckpointError, match=match) as e:
        recognize_state_dict(state, 'x.pth')
    assert 'config' in str(e.value) or 'task checkpoint' in str(e.value)


def test_tiny_official_layout_checkpoint_runs(tmp_path):
    """A full model saved like an official release ({'state_dict', 'meta'},
    torch.save) under a non-official name is recognised by its keys and
    loaded strictly by the inferencer."""
    from mmengine.registry import DefaultScope
    from mmseg.registry import MODELS
    cfg = Config.fromfile(str(shipped_config('normal', 'tiny')))
    with DefaultScope.overwrite_default_scope('mmseg'):
        model = MODELS.build(cfg.model)
    path = tmp_path / 'normals_finetuned.pth'
    torch.save({'state_dict': model.state_dict(),
                'meta': {'epoch': 12, 'dataset_meta': None}}, path)
    inferencer = SapiensInferencer([str(path)], device='cpu')
    assert inferencer.tasks == ('normal', )
    info = inferencer.model_infos['normal']
    assert (info.task, info.size, info.source) == ('normal', 'tiny', 'keys')
    loaded = inferencer.models['normal'].state_dict()
    for key, value in model.state_dict().items():
        torch.testing.assert_close(loaded[key], value)


# ------------------------------------------------------------- boxes
def test_nms_by_hand():
    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30],
                      [0, 0, 10, 10]], np.float32)
    scores = np.array([0.8, 0.9, 0.7, 0.1])
    # IoU(box0, box1) = 81 / 119 = 0.68
    np.testing.assert_array_equal(nms(boxes, scores, 0.5), [1, 2])
    np.testing.assert_array_equal(nms(boxes, scores, 0.7), [1, 0, 2])
    np.testing.assert_array_equal(nms(boxes, scores, 1.0), [1, 0, 2, 3])


def test_filter_boxes():
    boxes = np.array([[-5, -5, 20, 20], [30, 0, 30.5, 10], [5, 5, 50, 80]])
    out, scores = filter_boxes(boxes, [0.5, 0.9, 0.2], (40, 40),
                               score_thr=0.3)
    # clipped to the 40x40 image; the sliver is empty; 0.2 is under 0.3
    np.testing.assert_array_equal(out, [[0, 0, 20, 20]])
    np.testing.assert_allclose(scores, [0.5])


class _StubDetector(PersonDetector):

    def __init__(self, boxes, scores):
        self.boxes, self.scores, self.calls = boxes, scores, 0

    def __call__(self, img):
        self.calls += 1
        return (np.asarray(self.boxes, np.float32).reshape(-1, 4),
                np.asarray(self.scores, np.float32))


def test_box_fallback_order():
    img = np.zeros((50, 40, 3), np.uint8)
    det = _StubDetector([[1, 1, 20, 30], [2, 2, 21, 31], [25, 5, 39, 45]],
                        [0.9, 0.8, 0.2])
    boxes, scores, source = select_person_boxes(img, det, None, 0.3, 0.3)
    assert source == 'detector'  # NMS drops the overlap, 0.2 is too low
    np.testing.assert_array_equal(boxes, [[1, 1, 20, 30]])
    boxes, scores, source = select_person_boxes(
        img, det, np.array([[5, 5, 60, 20, 0.4], [0, 0, 10, 10, 0.7]]))
    assert source == 'user' and det.calls == 1  # detector not run
    np.testing.assert_array_equal(boxes, [[5, 5, 40, 20], [0, 0, 10, 10]])
    np.testing.assert_allclose(scores, [0.4, 0.7])
    boxes, scores, source = select_person_boxes(
        img, _StubDetector([[1, 1, 20, 30]], [0.1]), None, 0.3)
    assert source == 'whole_image'
    np.testing.assert_array_equal(boxes, [[0, 0, 40, 50]])
    assert select_person_boxes(img, None)[2] == 'whole_image'
    with pytest.raises(ValueError, match='N x 4'):
        select_person_boxes(img, None, np.zeros((2, 3)))


@pytest.mark.parametrize('method', ['hog', 'haar'])
def test_opencv_detectors(method):
    det = build_person_detector(method)
    assert isinstance(det, OpenCVPersonDetector)
    boxes, scores = det(np.full((120, 90, 3), 127, np.uint8))
    assert boxes.shape == (0, 4) and scores.shape == (0, )  # nobody there


def test_build_detector_errors():
    assert build_person_detector('none') is None
    with pytest.raises(ValueError, match='Unknown detector'):
        build_person_detector('yolo')
    with pytest.raises(ValueError, match='det_model'):
        build_person_detector('hog', det_weights='det.pth')


def test_mmdet_detector_keeps_persons(tmp_path):
    """An mmdet detector loaded from config + checkpoint (through the safe
    loader) returns only its person class."""
    import mmdet
    cfg = Config.fromfile(
        os.path.join(os.path.dirname(mmdet.__file__),
                     '.mim/configs/rtmdet/rtmdet_tiny_8xb32-300e_coco.py'))
    for step in cfg.test_dataloader.dataset.pipeline:  # small and fast
        if step['type'] in ('Resize', 'Pad'):
            step['size' if step['type'] == 'Pad' else 'scale'] = (64, 64)
    cfg.model.test_cfg.max_per_img = 50
    det = MMDetPersonDetector(cfg, None, 'cpu')
    for conv in det.model.bbox_head.rtm_cls:  # sure of persons only
        torch.nn.init.constant_(conv.bias, -10.0)
        torch.nn.init.constant_(conv.bias[0], 4.0)
    path = tmp_path / 'det.pth'
    torch.save({'state_dict': det.model.state_dict(), 'meta': {}}, path)
    det = build_person_detector('hog', det_model=cfg,
                                det_weights=str(path))
    img = np.random.default_rng(0).integers(0, 255, (60, 80, 3), np.uint8)
    boxes, scores = det(img)
    assert boxes.shape[1] == 4 and len(boxes) == len(scores) > 0
    assert (scores > 0.9).all()
    det.cat_ids = (1, )  # another class: nothing left
    assert len(det(img)[0]) == 0
    det.cat_ids = (1, 0)  # any of the listed classes
    assert len(det(img)[0]) == len(boxes)


# ------------------------------------------------------------ drawing
def test_draw_pose_uses_skeleton_colours():
    from mmpose.datasets.datasets.utils import parse_pose_metainfo
    meta = parse_pose_metainfo(
        dict(from_file='configs/_base_/datasets/coco.py'))
    img = np.zeros((100, 100, 3), np.uint8)
    kpts = np.full((1, 17, 2), 50.0)
    scores = np.zeros((1, 17))
    a, b = meta['skeleton_links'][0]
    kpts[0, a], kpts[0, b] = (20, 50), (80, 50)
    scores[0, [a, b]] = 1.0
    out = draw_pose(img, kpts, scores, meta, radius=2, thickness=3)
    link_rgb = meta['skeleton_link_colors'][0]
    assert tuple(out[50, 50]) == tuple(int(v) for v in link_rgb[::-1])
    assert tuple(out[50, 20]) == tuple(
        int(v) for v in meta['keypoint_colors'][a][::-1])
    assert out[10, 10].sum() == 0  # low-score keypoints are not drawn
    assert img.sum() == 0  # input untouched


def test_draw_seg_blends_palette_and_lists_present_classes():
    info = load_body_part_classes('goliath_28')
    img = np.full((60, 40, 3), 100, np.uint8)
    labels = np.zeros((60, 40), np.uint8)
    labels[:, 20:] = 21  # Torso
    out = draw_seg(img, labels, 'goliath_28', opacity=0.5)
    assert out.shape[0] == 60 and out.shape[1] > 40
    torso_bgr = np.array(info['palette'][21][::-1])
    np.testing.assert_allclose(out[30, 30], (100 + torso_bgr) / 2, atol=1)
    no_legend = draw_seg(img, labels, 'goliath_28', legend=False)
    assert no_legend.shape == img.shape
    # the legend width does not depend on the classes present (videos)
    assert draw_seg(img, labels * 0, 'goliath_28').shape == out.shape
    with pytest.raises(ValueError, match='28 classes'):
        draw_seg(img, labels + 10, 'goliath_28')


def test_colorize_depth_and_normal():
    depth = np.array([[1.0, 2.0], [3.0, np.nan]], np.float32)
    vis = colorize_depth(depth)
    gray = cv2.cvtColor(vis, cv2.COLOR_BGR2GRAY).astype(int)
    assert gray[0, 0] > gray[0, 1] > gray[1, 0]  # near is bright
    assert (vis[1, 1] == 0).all()  # invalid is black
    assert (colorize_depth(depth, np.array([[1, 0], [1, 0]], bool))[0, 1]
            == 0).all()
    normal = np.zeros((1, 2, 3), np.float32)
    normal[0, 0] = (0, 0, 1)
    normal[0, 1] = (1, 0, 0)
    vis = colorize_normal(normal)
    np.testing.assert_array_equal(vis[0, 0], [255, 128, 128])  # BGR
    np.testing.assert_array_equal(vis[0, 1], [128, 128, 255])
