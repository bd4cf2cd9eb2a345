"""People across video frames: stable track IDs and per-track keypoint
smoothing.

:class:`PoseTracker` matches each frame's people to the tracks of the
previous frames by box IoU and keypoint OKS (both taken against each track's
constant-velocity prediction), starts a track for a confident new person
and ends one that has gone unseen for a while. Each track can smooth its
keypoints with a :class:`~sapiens_mm.tracking.OneEuroFilter`.
:func:`bboxes_from_keypoints` gives the boxes of the next frame from this
frame's keypoints, for running the person detector only every N frames (as
rtmlib's ``PoseTracker`` does).
"""
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

import numpy as np
from scipy.optimize import linear_sum_assignment

from .one_euro_filter import OneEuroFilter

__all__ = ['PoseTracker', 'bbox_iou', 'keypoint_oks', 'bboxes_from_keypoints']

#: OKS sigma of a keypoint when the dataset gives none (about the mean of
#: COCO's 17 sigmas).
DEFAULT_SIGMA = 0.07
#: Fastest predicted motion of a track, in box sizes per frame (a person
#: running across a 30 fps frame moves about 0.05 of its height per frame).
MAX_SPEED = 0.15


def bbox_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairwise IoU of (M, 4) and (T, 4) (x1, y1, x2, y2) boxes -> (M, T)."""
    a = np.asarray(a, np.float64).reshape(-1, 4)[:, None]
    b = np.asarray(b, np.float64).reshape(-1, 4)[None]
    iw = (np.minimum(a[..., 2], b[..., 2]) -
          np.maximum(a[..., 0], b[..., 0])).clip(0)
    ih = (np.minimum(a[..., 3], b[..., 3]) -
          np.maximum(a[..., 1], b[..., 1])).clip(0)
    inter = iw * ih
    area = lambda x: ((x[..., 2] - x[..., 0]).clip(0) *  # noqa: E731
                      (x[..., 3] - x[..., 1]).clip(0))
    union = area(a) + area(b) - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.)


def keypoint_oks(kpts_a: np.ndarray, vis_a: np.ndarray, kpts_b: np.ndarray,
                 vis_b: np.ndarray, areas_b: np.ndarray,
                 sigmas: np.ndarray) -> np.ndarray:
    """Pairwise object keypoint similarity (COCO's OKS) between M and T
    people, over the keypoints visible in both.

    Args:
        kpts_a: (M, K, 2) keypoints.
        vis_a: (M, K) bool, visible keypoints of ``kpts_a``.
        kpts_b: (T, K, 2) keypoints.
        vis_b: (T, K) bool.
        areas_b: (T,) object scale s^2 of each of ``kpts_b`` (box area).
        sigmas: (K,) per-keypoint sigmas (COCO: k_i = 2 sigma_i).

    Returns:
        (M, T) OKS in [0, 1]; NaN for a pair with no keypoint visible in
        both.
    """
    d2 = ((kpts_a[:, None] - kpts_b[None])**2).sum(-1)  # (M, T, K)
    var = (2 * np.asarray(sigmas, np.float64))**2
    e = d2 / (2 * var[None, None] * np.maximum(areas_b, 1.)[None, :, None])
    both = vis_a[:, None] & vis_b[None]
    n = both.sum(-1)
    oks = np.where(both, np.exp(-e), 0.).sum(-1) / np.maximum(n, 1)
    return np.where(n > 0, oks, np.nan)


def bboxes_from_keypoints(keypoints: np.ndarray,
                          keypoint_scores: np.ndarray,
                          kpt_thr: float = 0.3,
                          expansion: float = 1.25,
                          img_shape: Optional[Tuple[int, int]] = None,
                          min_keypoints: int = 3,
                          reference_boxes: Optional[np.ndarray] = None,
                          min_scale: float = 0.25,
                          degenerate_scale: float = 0.1
                          ) -> Tuple[np.ndarray, np.ndarray]:
    """Boxes around people's keypoints, to take the place of detections on
    the frames where the detector does not run.

    The box of the keypoints scoring at least ``kpt_thr`` is enlarged by
    ``expansion`` about its centre (rtmlib's ``PoseTracker`` uses 1.25) and
    clipped to the image. A person with fewer than ``min_keypoints`` such
    keypoints is dropped: it is lost until the next detection.

    Keypoints of an unsure model bunch up inside the crop they came from,
    so boxes made from them would shrink frame after frame (to a few
    pixels) and the crops lose the person. With ``reference_boxes`` (the
    box each person last had from the detector, or the user) a box is at
    least ``min_scale`` times its reference's width and height (about the
    keypoints' centre), and a person whose keypoint box is below
    ``degenerate_scale`` of its reference in width or height is dropped as
    degenerate (the caller then runs the detector).

    Args:
        keypoints: (M, K, 2) keypoints in image pixels.
        keypoint_scores: (M, K).
        kpt_thr: Score of a keypoint that counts. Defaults to 0.3.
        expansion: Box enlargement. Defaults to 1.25.
        img_shape: (H, W) to clip to, or None.
        min_keypoints: Fewest confident keypoints of a kept person.
            Defaults to 3.
        reference_boxes: (M, 4) last detected box (x1, y1, x2, y2) of each
            person, or None for no minimum size.
        min_scale: Smallest box, as a fraction of the reference box's width
            and height. Defaults to 0.25.
        degenerate_scale: A keypoint box smaller than this fraction of the
            reference's width or height is dropped. Defaults to 0.1.

    Returns:
        tuple: (M', 4) float32 boxes (x1, y1, x2, y2) and the (M',) indices
        of the people kept.

    Raises:
        ValueError: ``reference_boxes`` is not (M, 4), or
            ``degenerate_scale > min_scale``.
    """
    if reference_boxes is not None:
        reference_boxes = np.asarray(reference_boxes, np.float64)
        if reference_boxes.shape != (len(keypoints), 4):
            raise ValueError(
                f'reference_boxes must be ({len(keypoints)}, 4), one box '
                f'per person, got {reference_boxes.shape}.')
    if not 0 <= degenerate_scale <= min_scale:
        raise ValueError(f'Need 0 <= degenerate_scale <= min_scale, got '
                         f'{degenerate_scale} and {min_scale}.')
    boxes, keep = [], []
    for i, (kpts, scores) in enumerate(zip(keypoints, keypoint_scores)):
        good = np.isfinite(kpts).all(-1) & (scores >= kpt_thr)
        if good.sum() < min_keypoints:
            continue
        lo, hi = kpts[good].min(0), kpts[good].max(0)
        centre, half = (lo + hi) / 2, (hi - lo) / 2 * expansion
        if reference_boxes is not None:
            ref_half = (reference_boxes[i, 2:] - reference_boxes[i, :2]) / 2
            if (half < degenerate_scale * ref_half).any():
                continue
            half = np.maximum(half, min_scale * ref_half)
        box = np.concatenate([centre - half, centre + half])
        if img_shape is not None:
            box[[0, 2]] = box[[0, 2]].clip(0, img_shape[1] - 1)
            box[[1, 3]] = box[[1, 3]].clip(0, img_shape[0] - 1)
        if box[2] - box[0] < 1 or box[3] - box[1] < 1:
            continue
        boxes.append(box)
        keep.append(i)
    return (np.asarray(boxes, np.float32).reshape(-1, 4),
            np.asarray(keep, np.int64))


@dataclass
class _Track:
    track_id: int
    bbox: np.ndarray  # (4,) last matched box
    keypoints: np.ndarray  # (K, 2) last matched (raw) keypoints
    visible: np.ndarray  # (K,) bool
    frame: int  # frame count of the last match
    velocity: np.ndarray = field(default_factory=lambda: np.zeros(2))
    filter: Optional[OneEuroFilter] = None

    def predicted(self, frame: int) -> Tuple[np.ndarray, np.ndarray]:
        """Box and keypoints moved on at the track's velocity to ``frame``."""
        shift = self.velocity * (frame - self.frame)
        return (self.bbox + np.tile(shift, 2),
                self.keypoints + shift[None])


class PoseTracker:
    """Track IDs (and optionally smoothed keypoints) of people in a video.

    Call :meth:`update` once per frame, in order. Each person is scored
    against each live track by ``iou_weight * IoU + (1 - iou_weight) * OKS``
    (IoU alone when no keypoint is visible in both), both against the
    track's position predicted at its velocity; people and tracks are paired
    by the Hungarian algorithm, and a pair scoring below ``match_thr`` is
    not a match.

    Args:
        sigmas: (K,) OKS sigmas of the keypoints (the dataset's ``sigmas``);
            None gives 0.07 for each.
        iou_weight: Weight of the box IoU against the keypoint OKS.
            Defaults to 0.5.
        match_thr: Lowest score of a match. Defaults to 0.3.
        birth_thr: A person matching no track starts one when its mean
            keypoint score is at least this (else it gets track ID -1).
            Defaults to 0.3.
        max_age: A track unseen for more than this many frames ends; until
            then a person reappearing near its predicted position takes its
            ID back. Defaults to 10.
        kpt_thr: Keypoints scoring below this do not count in the OKS.
            Defaults to 0.3.
        smooth: Smooth each track's keypoints with a One-Euro filter.
            Defaults to True.
        min_cutoff, beta, d_cutoff: The filter's settings (see
            :class:`~sapiens_mm.tracking.OneEuroFilter`; the speed is in
            person heights per second).
        fps: Frames per second, the filter's time base when :meth:`update`
            is given no time. Defaults to 30.

    Raises:
        ValueError: A setting out of range.
    """

    def __init__(self,
                 sigmas: Optional[Sequence[float]] = None,
                 iou_weight: float = 0.5,
                 match_thr: float = 0.3,
                 birth_thr: float = 0.3,
                 max_age: int = 10,
                 kpt_thr: float = 0.3,
                 smooth: bool = True,
                 min_cutoff: float = 4.0,
                 beta: float = 4.0,
                 d_cutoff: float = 1.0,
                 fps: float = 30.0) -> None:
        if not 0 <= iou_weight <= 1:
            raise ValueError(f'iou_weight must be in [0, 1], got '
                             f'{iou_weight!r}.')
        if not 0 <= match_thr <= 1:
            raise ValueError(f'match_thr must be in [0, 1] (a similarity), '
                             f'got {match_thr!r}.')
        if int(max_age) != max_age or max_age < 0:
            raise ValueError(f'max_age must be a number of frames >= 0, got '
                             f'{max_age!r}.')
        if not fps > 0:
            raise ValueError(f'fps must be positive, got {fps!r}.')
        self.sigmas = None if sigmas is None else np.asarray(
            sigmas, np.float64)
        self.iou_weight, self.match_thr = float(iou_weight), float(match_thr)
        self.birth_thr, self.max_age = float(birth_thr), int(max_age)
        self.kpt_thr, self.smooth, self.fps = float(kpt_thr), smooth, fps
        self.filter_cfg = dict(min_cutoff=min_cutoff, beta=beta,
                               d_cutoff=d_cutoff)
        OneEuroFilter(**self.filter_cfg)  # validates the settings
        self.reset()

    def reset(self) -> None:
        """Forget all tracks (e.g. at the start of another video); IDs start
        again from 0."""
        self.tracks: List[_Track] = []
        self.next_id = 0
        self.frame = -1

    def similarity(self, bboxes: np.ndarray, keypoints: np.ndarray,
                   visible: np.ndarray) -> np.ndarray:
        """(M, T) match scores of M people against the live tracks at the
        current frame."""
        if not self.tracks or not len(bboxes):
            return np.zeros((len(bboxes), len(self.tracks)))
        pred = [t.predicted(self.frame) for t in self.tracks]
        t_boxes = np.stack([p[0] for p in pred])
        t_kpts = np.stack([p[1] for p in pred])
        t_vis = np.stack([t.visible for t in self.tracks])
        iou = bbox_iou(bboxes, t_boxes)
        k = keypoints.shape[1]
        sigmas = self.sigmas if self.sigmas is not None else np.full(
            k, DEFAULT_SIGMA)
        if len(sigmas) != k:
            raise ValueError(f'The tracker has {len(sigmas)} OKS sigmas but '
                             f'the people have {k} keypoints.')
        areas = ((t_boxes[:, 2] - t_boxes[:, 0]) *
                 (t_boxes[:, 3] - t_boxes[:, 1]))
        oks = keypoint_oks(keypoints, visible, t_kpts, t_vis, areas, sigmas)
        w = self.iou_weight
        return np.where(np.isnan(oks), iou, w * iou + (1 - w) * oks)

    def update(self,
               bboxes: np.ndarray,
               keypoints: np.ndarray,
               keypoint_scores: np.ndarray,
               t: Optional[float] = None,
               known_ids: Optional[np.ndarray] = None
               ) -> Tuple[np.ndarray, np.ndarray]:
        """Assign this frame's people to tracks.

        Args:
            bboxes: (M, 4) person boxes (x1, y1, x2, y2).
            keypoints: (M, K, 2) keypoints in image pixels.
            keypoint_scores: (M, K).
            t: Frame time in seconds (the filter's time base); None: the
                frame count / ``fps``.
            known_ids: (M,) the track ID each person is known to have, -1
                where unknown: e.g. people whose boxes were made from that
                track's keypoints in the previous frame (no detector run).
                They keep it, if the track is live, without matching.

        Returns:
            tuple: (M,) int64 track IDs (-1: a person too unsure to start a
            track) and the (M, K, 2) float32 keypoints, smoothed per track
            when ``smooth`` (people with ID -1 unchanged).
        """
        self.frame += 1
        t = self.frame / self.fps if t is None else float(t)
        bboxes = np.asarray(bboxes, np.float64).reshape(-1, 4)
        keypoints = np.asarray(keypoints, np.float64)
        scores = np.asarray(keypoint_scores, np.float64)
        m = len(bboxes)
        if keypoints.shape[:1] != (m, ) or scores.shape != keypoints.shape[:2]:
            raise ValueError(
                f'{m} boxes but keypoints {keypoints.shape} and scores '
                f'{scores.shape}: give (M, 4), (M, K, 2) and (M, K).')
        finite = np.isfinite(keypoints).all(-1)
        visible = (scores >= self.kpt_thr) & finite
        ids = np.full(m, -1, np.int64)
        free = list(range(len(self.tracks)))
        if known_ids is not None:
            live = {tr.track_id: c for c, tr in enumerate(self.tracks)}
            for r, known in enumerate(np.asarray(known_ids).reshape(-1)):
                c = live.pop(int(known), None)
                if c is not None:
                    ids[r] = self._refresh(self.tracks[c], bboxes[r],
                                           keypoints[r], visible[r])
                    free.remove(c)
        rest = np.flatnonzero(ids < 0)
        sim = self.similarity(bboxes[rest], keypoints[rest],
                              visible[rest])[:, free]
        if sim.size:
            rows, cols = linear_sum_assignment(-sim)
            for r, c in zip(rows, cols):
                if sim[r, c] >= self.match_thr:
                    ids[rest[r]] = self._refresh(self.tracks[free[c]],
                                                 bboxes[rest[r]],
                                                 keypoints[rest[r]],
                                                 visible[rest[r]])
        for r in np.flatnonzero(ids < 0):
            if m and scores[r].mean() >= self.birth_thr:
                ids[r] = self._start(bboxes[r], keypoints[r], visible[r])
        self.tracks = [
            tr for tr in self.tracks if self.frame - tr.frame <= self.max_age
        ]
        out = keypoints.astype(np.float32)
        if self.smooth:
            by_id = {tr.track_id: tr for tr in self.tracks}
            for r in np.flatnonzero((ids >= 0) & finite.all(-1)):
                tr = by_id[int(ids[r])]
                height = max(bboxes[r, 3] - bboxes[r, 1], 1.)
                out[r] = tr.filter(keypoints[r], t, scale=height)
        return ids, out

    def _start(self, bbox, keypoints, visible) -> int:
        track = _Track(self.next_id, bbox.copy(), keypoints.copy(),
                       visible.copy(), self.frame,
                       filter=OneEuroFilter(**self.filter_cfg)
                       if self.smooth else None)
        self.tracks.append(track)
        self.next_id += 1
        return track.track_id

    def _refresh(self, track: _Track, bbox, keypoints, visible) -> int:
        gap = self.frame - track.frame
        both = visible & track.visible
        if both.any():  # mean keypoint motion: less noisy than the box's
            step = (keypoints[both] - track.keypoints[both]).mean(0)
        else:
            step = ((bbox[:2] + bbox[2:]) -
                    (track.bbox[:2] + track.bbox[2:])) / 2
        velocity = 0.5 * track.velocity + 0.5 * step / gap
        # At most MAX_SPEED box sizes per frame: erratic keypoints (an
        # unsure model) must not throw the prediction off the person.
        limit = MAX_SPEED * max(bbox[2] - bbox[0], bbox[3] - bbox[1], 1.)
        speed = float(np.hypot(*velocity))
        track.velocity = velocity * min(1., limit / speed) if speed else \
            velocity
        track.bbox, track.keypoints = bbox.copy(), keypoints.copy()
        track.visible, track.frame = visible.copy(), self.frame
        return track.track_id
