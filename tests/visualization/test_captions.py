"""Pictures that explain themselves: each drawing of the inferencers has a
caption below it naming the model (", tiny demo model" for the tiny arch,
"random weights" for a config alone) and, for pose, where the person boxes
came from (the detector and why it stands in for RTMDet-m, or the whole
image); the matting picture has a key of how alpha blends. The texts are
checked as drawn (OpenCV's putText calls recorded), the strip against the
picture without it."""
import cv2
import numpy as np
import pytest
import torch
from tiny_configs import TINY

from sapiens_mm.apis import SapiensInferencer
from sapiens_mm.detection import OpenCVPersonDetector
from sapiens_mm.visualization import add_caption, matting_key

MATTING = TINY['pose'].parents[2] / \
    'sapiens2/matting/sapiens2_tiny_matting_gss_p3m_metasim-256x192.py'


@pytest.fixture
def drawn(monkeypatch):
    """The texts OpenCV draws from now on."""
    texts = []
    put = cv2.putText

    def record(img, text, *args, **kwargs):
        texts.append(text)
        return put(img, text, *args, **kwargs)

    monkeypatch.setattr(cv2, 'putText', record)
    return texts


def test_caption_strip_below_the_picture_holds_the_lines(drawn):
    img = np.random.default_rng(0).integers(0, 255, (60, 200, 3), np.uint8)
    lines = ['pose: sapiens2-pose-0.4b', 'boxes: whole image, OpenCV HOG '
             'found no one']
    out = add_caption(img, lines)
    assert out.shape[1:] == img.shape[1:] and out.shape[0] > 60
    np.testing.assert_array_equal(out[:60], img)  # the picture untouched
    strip = out[60:]
    assert (strip > 200).all(-1).any()  # white text on the dark strip
    # wrapped to the width, every word drawn, in order
    assert ' '.join(drawn).split() == ' '.join(lines).split()
    assert add_caption(img, []) is img


def test_matting_key_runs_from_person_to_background():
    key = matting_key(120, (0, 177, 64))
    w = key.shape[1]
    col = key[:, w // 2].astype(int)
    # the bar's rows: one colour across its middle half (text rows are not)
    middle = key[:, w // 4 + 1:w - w // 4 - 1].astype(int)
    bar = np.flatnonzero((middle == middle[:, :1]).all((1, 2))
                         & (np.abs(col - 40).sum(1) > 0))
    assert len(bar) > 120 / 3 and (np.diff(bar) == 1).all()
    green = np.array([64, 177, 0])  # BGR
    # bottom: the background colour (alpha 0); top: the grey person
    assert np.abs(col[bar.max()] - green).max() <= 2
    assert np.abs(col[bar.min()] - 220).max() <= 2


def test_every_inferencer_picture_names_its_model_and_boxes(drawn, tmp_path):
    hog = OpenCVPersonDetector('hog')
    hog.fallback = 'RTMDet-m weights not cached'
    inferencer = SapiensInferencer(
        {'seg': str(TINY['seg']), 'pose': str(TINY['pose']),
         'matting': str(MATTING)}, device='cpu', detector=hog)
    img = np.full((80, 60, 3), 90, np.uint8)  # no one for HOG to find
    drawn.clear()
    (res, ) = inferencer(img, return_vis=True, show_progress=False)
    text = ' '.join(drawn)
    for task, path in (('seg', TINY['seg']), ('pose', TINY['pose']),
                       ('matting', MATTING)):
        caption = f'{task}: {path.name}, random weights, tiny demo model'
        assert ' '.join(caption.split()) in text, (caption, text)
        # the picture and its key are above the caption
        assert res['visualization'][task].shape[0] > 80
    assert ('boxes: whole image, OpenCV HOG (RTMDet-m weights not cached) '
            'found no one') in text
    # the matting picture has its key beside it
    assert 'alpha 1' in drawn and 'alpha 0' in drawn


def test_a_trained_checkpoint_is_named_by_its_folder_and_file(tmp_path):
    """make demo's models: work_dirs/demo/<task>/iter_N.pth, a tiny arch."""
    from mmengine.config import Config

    from sapiens_mm.apis import DenseInferencer
    from sapiens_mm.apis.inference import init_model
    model = init_model(str(TINY['depth']))
    ckpt = tmp_path / 'depth' / 'iter_3.pth'
    ckpt.parent.mkdir()
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, ckpt)
    depth = DenseInferencer(Config.fromfile(str(TINY['depth'])), str(ckpt),
                            device='cpu', show_progress=False)
    assert depth.model_label == 'depth/iter_3.pth, tiny demo model'
    assert depth.caption() == ['depth: depth/iter_3.pth, tiny demo model']


def _swatch_height(panel):
    """Height of the first colour swatch of a seg legend panel."""
    col = panel[:, 5].astype(int)
    rows = np.flatnonzero((col != 255).any(-1))
    return int(np.argmax(np.diff(rows) > 1)) + 1 if len(rows) else 0


def test_keys_of_a_wide_image_stay_readable_when_it_is_scaled_to_fit(drawn):
    """A picture is shown scaled to a page or window width: a 3:1 image's
    legend rows and depth bar text grow with its width, so that shown 800 px
    wide its legend rows are still at least 10 px tall (sized by the height
    alone, as a 3:4 portrait's, they were 6 px), and every part present is
    still listed."""
    from sapiens_mm.datasets.metainfo import load_body_part_classes
    from sapiens_mm.visualization import draw_depth, draw_seg
    from sapiens_mm.visualization.legend import font_scale, panel_width
    names = load_body_part_classes('goliath_28')['classes']
    shown = {}
    for w in (180, 720):  # portrait 3:4, panorama 3:1
        labels = np.tile(np.arange(28, dtype=np.uint8).repeat(-(-w // 28)),
                         (240, 1))[:, :w]
        drawn.clear()
        vis = draw_seg(np.full((240, w, 3), 128, np.uint8), labels)
        assert sorted(drawn) == sorted(names[c] for c in np.unique(labels))
        shown[w] = _swatch_height(vis[:, w:]) * 800 / vis.shape[1]
    assert min(shown.values()) >= 10, shown
    # the depth bar's panel and text grow with the width as well
    assert panel_width(240, 720) > panel_width(240, 180)
    assert font_scale(240, 720) > font_scale(240, 180)
    depth = np.tile(np.linspace(1, 2, 720, dtype=np.float32), (240, 1))
    assert draw_depth(depth).shape[1] == 720 + panel_width(240, 720)
