"""Boxes made from the previous frame's keypoints (the frames where the
person detector does not run): a minimum size relative to the person's
last detected box, and degenerate boxes dropped so the detector runs."""
import numpy as np
import pytest

from sapiens_mm.tracking import bboxes_from_keypoints


def _person(x0, y0, x1, y1, k=17, seed=0):
    rng = np.random.default_rng(seed)
    pts = np.stack([rng.uniform(x0, x1, k), rng.uniform(y0, y1, k)], -1)
    pts[0], pts[1] = (x0, y0), (x1, y1)  # the extent is exact
    return pts


def test_bunched_keypoints_keep_a_quarter_of_the_detected_box():
    # An unsure model's keypoints bunched in 8 x 4 px around (135, 12):
    # the box of the issue report ([135, 11, 3, 1] after a few frames).
    kpts = _person(131, 10, 139, 14)[None]
    scores = np.ones((1, 17))
    detected = np.array([[100., 0., 180., 160.]])  # 80 x 160
    plain, _ = bboxes_from_keypoints(kpts, scores)
    np.testing.assert_allclose(plain[0], [130, 9.5, 140, 14.5])  # x1.25
    boxes, keep = bboxes_from_keypoints(kpts, scores,
                                        reference_boxes=detected,
                                        degenerate_scale=0.0)
    # centred on the keypoints, a quarter of 80 x 160 = 20 x 40
    np.testing.assert_allclose(boxes[0], [125, -8, 145, 32])
    assert keep.tolist() == [0]
    # clipped to the image like any box
    boxes, _ = bboxes_from_keypoints(kpts, scores, img_shape=(200, 300),
                                     reference_boxes=detected,
                                     degenerate_scale=0.0)
    np.testing.assert_allclose(boxes[0], [125, 0, 145, 32])


def test_degenerate_keypoint_boxes_are_dropped_others_grow_back():
    scores = np.ones((2, 17))
    kpts = np.stack([
        _person(131, 10, 139, 14),  # 10 x 5 px of a 80 x 160 person
        _person(300, 20, 360, 150),  # a person seen whole
    ])
    detected = np.array([[100., 0., 180., 160.], [290., 10., 370., 160.]])
    boxes, keep = bboxes_from_keypoints(kpts, scores,
                                        reference_boxes=detected)
    assert keep.tolist() == [1]  # person 0 degenerate: under a tenth
    # person 1: the keypoint box, x1.25, larger than the minimum
    np.testing.assert_allclose(boxes[0], [292.5, 3.75, 367.5, 166.25])


def test_reference_boxes_are_checked():
    kpts = _person(0, 0, 10, 10)[None]
    with pytest.raises(ValueError, match=r'\(1, 4\)'):
        bboxes_from_keypoints(kpts, np.ones((1, 17)),
                              reference_boxes=np.zeros((2, 4)))
    with pytest.raises(ValueError, match='degenerate_scale'):
        bboxes_from_keypoints(kpts, np.ones((1, 17)), min_scale=0.1,
                              degenerate_scale=0.2)
