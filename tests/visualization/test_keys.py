"""The keys of the dense visualisations (depth colour bar, normal sphere)
and the track-ID labels: present, different from the image, and telling
the truth about the colours (checked against closed forms)."""
import cv2
import numpy as np

from sapiens_mm.visualization import (colorize_depth, colorize_normal,
                                      draw_depth, draw_normal, draw_pose)
from sapiens_mm.visualization.color import track_color
from sapiens_mm.visualization.legend import panel_width


def _ramp_depth(h=120, w=90):
    """Depth growing left to right, 1 m to 4 m; the right quarter invalid."""
    depth = np.tile(np.linspace(1.0, 4.0, w, dtype=np.float32), (h, 1))
    depth[:, -w // 4:] = np.nan
    return depth


def test_depth_colorbar_beside_the_map_matches_its_colours():
    depth = _ramp_depth()
    h, w = depth.shape
    vis = draw_depth(depth, metric=True)
    assert vis.shape == (h, w + panel_width(h), 3)
    np.testing.assert_array_equal(vis[:, :w], colorize_depth(depth))
    bar = vis[:, w:]
    # a key, not a copy of the image: mostly its own colours
    assert not np.array_equal(bar[:, :w][:, :bar.shape[1]],
                              vis[:, :bar.shape[1]])
    # The bar's column: its top colour is the nearest pixel's (1 m), its
    # bottom colour the farthest valid pixel's, and the colours between
    # are the inferno map from bright to dark.
    pw = bar.shape[1]
    col = bar[:, pw // 2].astype(int)
    # the bar's rows: one colour across its middle half, not the panel's
    # grey (text rows are not uniform)
    middle = bar[:, pw // 4 + 1:pw - pw // 4 - 1].astype(int)
    uniform = (middle == middle[:, :1]).all((1, 2))
    run = np.flatnonzero(uniform & (np.abs(col - 40).sum(1) > 0))
    assert len(run) > h / 3 and (np.diff(run) == 1).all()
    top, bottom = col[run.min()], col[run.max()]
    near = colorize_depth(depth)[0, 0].astype(int)
    far = colorize_depth(depth)[0, np.flatnonzero(np.isfinite(depth[0]))[-1]]
    # one colour-map step (256 levels over the bar's rows)
    assert np.abs(top - near).max() <= 12
    assert np.abs(bottom - far.astype(int)).max() <= 12
    grey = cv2.cvtColor(bar[run, bar.shape[1] // 2][None], cv2.COLOR_BGR2GRAY)
    assert (np.diff(grey[0].astype(int)) <= 2).all()  # bright to dark
    # the labels: white text above and below the bar
    white = (bar > 200).all(-1)
    assert white[:run.min()].any() and white[run.max() + 1:].any()


def test_depth_key_without_valid_pixels_still_has_its_panel():
    depth = np.full((40, 30), np.nan, np.float32)
    vis = draw_depth(depth)
    assert vis.shape == (40, 30 + panel_width(40), 3)
    assert (vis[:, :30] == 0).all()


def test_normal_key_sphere_shows_the_colour_of_each_direction():
    normal = np.zeros((160, 120, 3), np.float32)
    normal[..., 2] = -1
    h, w = normal.shape[:2]
    vis = draw_normal(normal)
    key = vis[:, w:]
    assert key.shape == (h, panel_width(h), 3)

    def colour(n):  # closed form: RGB = (n + 1) / 2 * 255, as BGR
        rgb = np.round((np.asarray(n, float) + 1) / 2 * 255)
        return rgb[::-1]

    # The sphere: the pixels whose colour is not the panel grey or text.
    inner = np.abs(key.astype(int) - (40, 40, 40)).sum(-1) > 30
    inner &= ~(key > 200).all(-1)
    ys, xs = np.nonzero(inner)
    cy, cx = int(np.median(ys)), int(np.median(xs))
    r = (xs.max() - xs.min()) / 2
    # facing the camera at the centre (labelled there), right at the right
    # edge, down at the bottom edge
    np.testing.assert_allclose(key[cy + int(0.35 * r), cx],
                               colour((0, 0.35, -np.sqrt(1 - 0.35**2))),
                               atol=12)
    np.testing.assert_allclose(key[cy, cx + int(0.9 * r)],
                               colour((0.9, 0, -np.sqrt(1 - 0.81))), atol=12)
    np.testing.assert_allclose(key[cy + int(0.9 * r), cx],
                               colour((0, 0.9, -np.sqrt(1 - 0.81))), atol=12)
    assert not np.array_equal(key, vis[:, :key.shape[1]])
    np.testing.assert_array_equal(vis[:, :w], colorize_normal(normal))


def test_track_id_label_is_large_and_contrasting_at_1080p():
    meta = dict(num_keypoints=2, skeleton_links=[(0, 1)],
                keypoint_colors=[(255, 0, 0)] * 2,
                skeleton_link_colors=[(255, 0, 0)])
    img = np.full((1080, 1920, 3), 90, np.uint8)
    kpts = np.array([[[600., 400.], [600., 900.]]])
    box = np.array([[500., 300., 700., 1000.]])
    out = draw_pose(img, kpts, np.ones((1, 2)), meta, bboxes=box,
                    track_ids=np.array([3]))
    color = np.array(track_color(3))
    filled = (out == color).all(-1)
    # the label: a box of the track's colour above the person's box
    ys, xs = np.nonzero(filled[:300])
    assert ys.size
    height = ys.max() - ys.min() + 1
    assert height >= 30, height  # capitals 24 px tall at 1080p, + padding
    assert xs.min() >= 500 - 3  # at the box's left edge (its line 3 px)
    # its text is black or white inside it (contrast with the fill)
    label = out[ys.min():ys.max() + 1, xs.min():xs.max() + 1]
    ink = (label < 60).all(-1) | (label > 200).all(-1)
    assert ink.sum() > 100
    # without boxes the label sits above the highest keypoint
    out = draw_pose(img, kpts, np.ones((1, 2)), meta, track_ids=np.array([3]))
    ys, _ = np.nonzero((out == color).all(-1)[:400])
    assert ys.size and ys.min() < 388 - 30  # the top keypoint's top: 388
