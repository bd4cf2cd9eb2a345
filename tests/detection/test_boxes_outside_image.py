"""A user box entirely outside the image is dropped with a warning, not
silently (the whole image would be used without a word)."""
import numpy as np
from log_helpers import logged_warnings

from sapiens_mm.detection.person_detector import select_person_boxes


def _warnings(fn):
    with logged_warnings() as said:
        result = fn()
    return result, said


def test_box_outside_the_image_is_said():
    img = np.zeros((40, 30, 3), np.uint8)
    (boxes, _, source), said = _warnings(lambda: select_person_boxes(
        img, user_boxes=np.array([[100, 100, 150, 160]], np.float32)))
    assert source == 'whole_image'
    np.testing.assert_array_equal(boxes, [[0, 0, 30, 40]])
    assert len(said) == 1 and '1 of 1 person box(es) lie outside the ' \
        '30x40 image (e.g. [100.0, 100.0, 150.0, 160.0])' in said[0]
    assert 'whole image' in said[0]
    # one inside, one outside: the inside one is used, the other said
    (boxes, _, source), said = _warnings(lambda: select_person_boxes(
        img, user_boxes=np.array([[2, 3, 20, 30], [-50, -50, -10, -10]],
                                 np.float32)))
    assert source == 'user'
    np.testing.assert_array_equal(boxes, [[2, 3, 20, 30]])
    assert len(said) == 1 and '1 of 2 person box(es)' in said[0]
    # all inside: nothing said
    _, said = _warnings(lambda: select_person_boxes(
        img, user_boxes=np.array([[2, 3, 20, 30]], np.float32)))
    assert said == []
