"""Tracking, One-Euro smoothing and dense stabilisation on synthetic
sequences whose truth is known."""
import math

import numpy as np
import pytest

from sapiens_mm.tracking import (
    DepthStabilizer,
    NormalStabilizer,
    OneEuroFilter,
    PoseTracker,
    bbox_iou,
    bboxes_from_keypoints,
    keypoint_oks,
)

FPS = 30.0


def _pose(rng, k=17, arms_up=False):
    """(K, 2) keypoint offsets of a 60 x 160 px person about its centre."""
    pose = rng.uniform([-30, -80], [30, 80], (k, 2))
    if arms_up:
        pose[5:11, 1] = -75 + rng.uniform(-5, 5, 6)  # wrists/elbows high
    return pose


def _crossing(same_pose: bool, frames=81, noise=1.5, seed=0):
    """Two people walking towards each other along the same line and past
    each other (their boxes overlap for ~15 frames). Yields (boxes,
    keypoints, scores, person index of each row), rows in random order as a
    detector would give them."""
    rng = np.random.default_rng(seed)
    poses = [_pose(rng), None]
    poses[1] = poses[0].copy() if same_pose else _pose(rng, arms_up=True)
    for f in range(frames):
        xs = (40 + 4 * f, 364 - 4 * f)  # 4 px apart at the closest
        kpts = np.stack([
            poses[p] + [xs[p], 120] + rng.normal(0, noise, poses[p].shape)
            for p in (0, 1)
        ])
        boxes, _ = bboxes_from_keypoints(kpts, np.ones((2, 17)),
                                         expansion=1.1)
        order = rng.permutation(2)
        yield boxes[order], kpts[order], np.full((2, 17), 0.9), order


@pytest.mark.parametrize('seed', range(3))
@pytest.mark.parametrize('same_pose', [False, True])
def test_ids_stable_through_crossing(same_pose, seed):
    """Different poses are told apart by OKS (box IoU alone, without
    motion, swaps the IDs in 9 of 30 such sequences); identical poses by the
    tracks' motion (at the crossing they are 4 px apart; without the
    constant-velocity prediction all 30 swap)."""
    tracker = PoseTracker(smooth=False)
    owner = {}
    overlapped = 0
    for boxes, kpts, scores, person in _crossing(same_pose, seed=seed):
        ids, _ = tracker.update(boxes, kpts, scores)
        overlapped += bbox_iou(boxes[:1], boxes[1:])[0, 0] > 0.5
        for i, p in zip(ids, person):
            assert owner.setdefault(int(p), int(i)) == i
    assert overlapped >= 4  # the people really cross
    assert sorted(owner.values()) == [0, 1]


def test_birth_and_death():
    tracker = PoseTracker(birth_thr=0.5, max_age=3, smooth=False)
    box = np.array([[10, 10, 70, 170]], np.float32)
    kpts = np.random.default_rng(0).uniform([10, 10], [70, 170], (1, 17, 2))
    ids, _ = tracker.update(box, kpts, np.full((1, 17), 0.2))
    assert ids.tolist() == [-1]  # too unsure to start a track
    ids, _ = tracker.update(box, kpts, np.full((1, 17), 0.8))
    assert ids.tolist() == [0]
    for _ in range(3):  # unseen for max_age frames: still alive
        tracker.update(np.zeros((0, 4)), np.zeros((0, 17, 2)),
                       np.zeros((0, 17)))
    ids, _ = tracker.update(box, kpts, np.full((1, 17), 0.8))
    assert ids.tolist() == [0]
    for _ in range(4):  # unseen for longer: the track ends
        tracker.update(np.zeros((0, 4)), np.zeros((0, 17, 2)),
                       np.zeros((0, 17)))
    ids, _ = tracker.update(box, kpts, np.full((1, 17), 0.8))
    assert ids.tolist() == [1]


def test_iou_and_oks_hand_computed():
    iou = bbox_iou([[0, 0, 10, 10]], [[5, 0, 15, 10], [20, 20, 30, 30]])
    np.testing.assert_allclose(iou, [[50 / 150, 0.]])
    # One keypoint 3 px off, one exact, one invisible; area 100, sigma 0.1:
    # exp(-9 / (2 * 0.04 * 100)) and exp(0), averaged over the 2 visible.
    a = np.array([[[0., 0.], [5., 5.], [9., 9.]]])
    b = np.array([[[3., 0.], [5., 5.], [0., 0.]]])
    vis = np.array([[True, True, False]])
    oks = keypoint_oks(a, vis, b, vis, np.array([100.]), np.full(3, 0.1))
    np.testing.assert_allclose(oks, [[(math.exp(-9 / 8) + 1) / 2]])
    none = keypoint_oks(a, ~vis, b, vis, np.array([100.]), np.full(3, 0.1))
    assert np.isnan(none).all()


def test_bboxes_from_keypoints():
    kpts = np.array([[[10., 20.], [30., 60.], [20., 40.], [500., 500.]],
                     [[0., 0.], [1., 1.], [2., 2.], [3., 3.]]])
    scores = np.array([[0.9, 0.9, 0.9, 0.1], [0.9, 0.1, 0.1, 0.1]])
    boxes, keep = bboxes_from_keypoints(kpts, scores, kpt_thr=0.3,
                                        expansion=1.5, img_shape=(55, 100))
    # Confident keypoints span x 10..30, y 20..60: centre (20, 40), half
    # size (10, 20) * 1.5, y clipped to the image's 54.
    assert keep.tolist() == [0]
    np.testing.assert_allclose(boxes, [[5., 10., 35., 54.]])


def _ema_step_response(alpha, n):
    return 1 - (1 - alpha)**np.arange(1, n + 1)


def test_one_euro_without_beta_is_the_papers_low_pass():
    """beta = 0: a first-order low-pass of factor 1 / (1 + tau / dt),
    tau = 1 / (2 pi min_cutoff); its step response is 1 - (1 - a)^n."""
    f = OneEuroFilter(min_cutoff=2.0, beta=0.0)
    out = [f(np.zeros(1), 0.0)[0]]
    out += [f(np.ones(1), i / FPS)[0] for i in range(1, 11)]
    a = 1 / (1 + (1 / (2 * math.pi * 2.0)) * FPS)
    np.testing.assert_allclose(out[1:], _ema_step_response(a, 10), rtol=1e-12)


def test_one_euro_cuts_jitter_and_follows_steps():
    """Defaults, a 200 px tall person at 30 fps, 2 px keypoint noise."""
    height, n = 200.0, 300
    t = np.arange(n) / FPS
    rng = np.random.default_rng(0)
    clean = 100 + 40 * np.sin(2 * np.pi * 0.5 * t)  # walking pace
    noisy = clean + rng.normal(0, 2.0, n)
    f = OneEuroFilter()
    smooth = np.array([f(np.array([v]), ti, scale=height)[0]
                       for v, ti in zip(noisy, t)])

    def acc_rms(x):
        return np.sqrt(np.mean(np.diff(x, 2)**2))

    # White noise of std s has second differences of std s * sqrt(6).
    assert acc_rms(noisy) == pytest.approx(2.0 * math.sqrt(6), rel=0.1)
    assert acc_rms(smooth) <= 0.5 * acc_rms(noisy)
    # A step of a tenth of the person's height: within 10 % of the new
    # value at most 2 frames after it.
    f = OneEuroFilter()
    step = np.r_[np.zeros(10), np.full(10, 0.1 * height)]
    out = np.array([f(np.array([v]), i / FPS, scale=height)[0]
                    for i, v in enumerate(step)])
    lag = int(np.argmax(out[10:] >= 0.9 * 0.1 * height))
    assert lag <= 2


def test_one_euro_bad_input():
    with pytest.raises(ValueError, match='min_cutoff'):
        OneEuroFilter(min_cutoff=0)
    f = OneEuroFilter()
    f(np.zeros(2), 0.0)
    with pytest.raises(ValueError, match='increasing'):
        f(np.zeros(2), 0.0)
    with pytest.raises(ValueError, match='one filter per'):
        f(np.zeros(3), 1.0)


def test_tracker_smooths_per_track():
    """With smoothing on, a still person's jittered keypoints come out with
    less jitter; the filter runs per track."""
    rng = np.random.default_rng(1)
    base = _pose(rng) + [200, 120]
    tracker = PoseTracker(smooth=True)
    raw, out = [], []
    for _ in range(60):
        kpts = base + rng.normal(0, 2.0, base.shape)
        boxes, _ = bboxes_from_keypoints(kpts[None], np.ones((1, 17)))
        ids, smoothed = tracker.update(boxes, kpts[None], np.ones((1, 17)))
        assert ids.tolist() == [0]
        raw.append(kpts)
        out.append(smoothed[0])
    err = lambda x: np.sqrt(np.mean((np.array(x)[10:] - base)**2))  # noqa
    assert err(out) < 0.8 * err(raw)


def _scene(h=40, w=50):
    """A slanted plane 2-4 m away and an elliptic person mask."""
    yy, xx = np.mgrid[:h, :w]
    depth = 2.0 + 1.5 * xx / w + 0.5 * yy / h
    fg = ((xx - w / 2) / (0.45 * w))**2 + ((yy - h / 2) / (0.45 * h))**2 < 1
    return depth, fg


def test_depth_aligned_to_the_first_frame():
    """Frames = the scene under a different scale and shift each: the
    output is the scene in the first frame's units, exactly."""
    depth, fg = _scene()
    stab = DepthStabilizer(alpha=0.5)
    rng = np.random.default_rng(0)
    for i in range(8):
        s, t = (1.0, 0.0) if i == 0 else (rng.uniform(0.5, 2),
                                          rng.uniform(-1, 1))
        frame = np.where(fg, s * depth + t, np.nan)
        out = stab(frame)
        np.testing.assert_allclose(out[fg], depth[fg], rtol=1e-5)
        assert np.isnan(out[~fg]).all()


def test_depth_noise_falls_as_the_average_says():
    """Static scene, independent noise per frame: after many frames the
    noise variance is alpha / (2 - alpha) of a frame's."""
    depth, fg = _scene(80, 100)
    alpha, sigma = 0.4, 0.05
    stab = DepthStabilizer(alpha=alpha)
    rng = np.random.default_rng(1)
    errs = []
    for i in range(200):
        frame = depth + rng.normal(0, sigma, depth.shape)
        out = stab(frame, fg)
        if i >= 30:
            errs.append(out[fg] - depth[fg])
    expected = sigma * math.sqrt(alpha / (2 - alpha))
    # 5 %: the per-frame fit's own noise and the sampling of 170 frames.
    assert np.std(errs) == pytest.approx(expected, rel=0.05)
    # No drift of the depth contrast over the frames (a plain least-squares
    # fit of one noisy frame on the other shrinks or swells it every frame:
    # about +12 % after 60 frames here).
    assert np.std(out[fg]) == pytest.approx(np.std(depth[fg]), rel=0.01)


def test_normals_filtered_and_unit():
    rng = np.random.default_rng(2)
    true = np.zeros((20, 30, 3))
    true[..., 2] = 1.0
    stab = NormalStabilizer(alpha=0.3)
    angle_raw, angle_out = [], []
    for _ in range(40):
        noisy = true + rng.normal(0, 0.1, true.shape)
        noisy /= np.linalg.norm(noisy, axis=-1, keepdims=True)
        noisy[0, 0] = np.nan  # no normal there
        out = stab(noisy)
        np.testing.assert_allclose(
            np.linalg.norm(out[1:, 1:], axis=-1), 1.0, atol=1e-6)
        assert np.isnan(out[0, 0]).all()
        angle_raw.append(np.arccos(noisy[1:, 1:, 2].clip(-1, 1)).mean())
        angle_out.append(np.arccos(out[1:, 1:, 2].clip(-1, 1)).mean())
    assert np.mean(angle_out[10:]) < 0.7 * np.mean(angle_raw[10:])


def test_stabilizer_bad_alpha():
    with pytest.raises(ValueError, match='alpha'):
        DepthStabilizer(alpha=0)
    with pytest.raises(ValueError, match='alpha'):
        NormalStabilizer(alpha=1.5)


def test_known_ids_are_kept_without_matching():
    """People whose boxes were made from a track's keypoints (no detector
    on that frame) keep that track's ID even where matching would not
    pair them (here: the two people swapped places)."""
    tracker = PoseTracker(smooth=False)
    rng = np.random.default_rng(3)
    kpts = np.stack([_pose(rng) + [100, 120], _pose(rng) + [300, 120]])
    boxes, _ = bboxes_from_keypoints(kpts, np.ones((2, 17)))
    ids, _ = tracker.update(boxes, kpts, np.ones((2, 17)))
    assert ids.tolist() == [0, 1]
    swapped = kpts[::-1].copy()
    sw_boxes = boxes[::-1].copy()
    ids, _ = tracker.update(sw_boxes, swapped, np.ones((2, 17)),
                            known_ids=np.array([0, -1]))
    # row 0 is known to be track 0; row 1 (where track 0 was) is matched
    # among the other tracks only: track 1 is 200 px away, so it starts 2
    assert ids.tolist() == [0, 2]


def test_draw_pose_colours_people_by_track_id():
    from sapiens_mm.visualization import draw_pose
    from sapiens_mm.visualization.color import track_color
    meta = dict(num_keypoints=2, skeleton_links=[(0, 1)],
                keypoint_colors=[(255, 0, 0)] * 2,
                skeleton_link_colors=[(255, 0, 0)])
    kpts = np.array([[[10., 10.], [10., 50.]], [[60., 10.], [60., 50.]]])
    img = np.zeros((64, 80, 3), np.uint8)
    out = draw_pose(img, kpts, np.ones((2, 2)), meta, radius=3, thickness=3,
                    track_ids=np.array([0, 1]))
    assert tuple(out[30, 10]) == track_color(0)  # on person 0's link
    assert tuple(out[30, 60]) == track_color(1)
    assert track_color(0) != track_color(1)
    assert track_color(-1) == (128, 128, 128)
    plain = draw_pose(img, kpts, np.ones((2, 2)), meta, radius=3,
                      thickness=3)
    assert tuple(plain[30, 10]) == (0, 0, 255)  # the skeleton's RGB red
