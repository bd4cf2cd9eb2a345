"""Drawing people's skeletons (OpenCV, BGR uint8).

Boxes, skeleton links and keypoints in the colours of the skeleton's
metainfo (COCO 17, COCO-WholeBody 133 or Goliath 308). Face and hand points
of the dense layouts are drawn smaller than body points. Colours in the
metainfo are RGB (the OpenMMLab convention); images are BGR like
``cv2.imread``.
"""
from typing import Optional, Tuple

import cv2
import numpy as np

from .color import rgb_to_bgr, track_color
from .legend import text_label

__all__ = ['draw_pose']


def _detail_keypoints(dataset_meta: dict) -> np.ndarray:
    """Indices of the small (face / hand) keypoints of a layout."""
    k = int(dataset_meta['num_keypoints'])
    if k == 133:  # 17 body + 6 feet, then face 68 + hands 2 x 21
        return np.arange(23, 133)
    if k == 308:
        from sapiens_mm.datasets.metainfo_goliath import goliath_keypoint_groups
        groups = goliath_keypoint_groups()
        return np.asarray(groups['face'] + groups['left_hand'] +
                          groups['right_hand'])
    return np.zeros(0, np.int64)


def _auto_size(img_shape: Tuple[int, int], at_1024: float) -> int:
    """A drawing size that is ``at_1024`` pixels on a 1024-pixel image."""
    return max(1, int(round(at_1024 * max(img_shape[:2]) / 1024)))


def draw_pose(img: np.ndarray,
              keypoints: np.ndarray,
              keypoint_scores: np.ndarray,
              dataset_meta: dict,
              bboxes: Optional[np.ndarray] = None,
              kpt_thr: float = 0.3,
              radius: Optional[int] = None,
              thickness: Optional[int] = None,
              bbox_color: Tuple[int, int, int] = (0, 255, 0),
              track_ids: Optional[np.ndarray] = None) -> np.ndarray:
    """Draw people's skeletons.

    Args:
        img: (H, W, 3) uint8 BGR image (not modified).
        keypoints: (N, K, 2) keypoint (x, y) in image pixels.
        keypoint_scores: (N, K) scores; points (and links to points) below
            ``kpt_thr`` are not drawn.
        dataset_meta: Parsed mmpose metainfo of the skeleton
            (``keypoint_colors``, ``skeleton_links``,
            ``skeleton_link_colors``, ``num_keypoints``).
        bboxes: (N, 4) person boxes (x1, y1, x2, y2) to draw, or None.
        kpt_thr: Score threshold. Defaults to 0.3 (official demo).
        radius: Keypoint radius; None scales the official 6 px at 1024 px
            to the image size.
        thickness: Link thickness; None scales the official 3 px.
        bbox_color: BGR colour of the boxes.
        track_ids: (N,) track ID of each person (video): each person's box,
            links and keypoints are drawn in the colour of its ID
            (:func:`~sapiens_mm.visualization.color.track_color`) and its
            ID is written above its box (above its highest keypoint without
            boxes) on a label of that colour, capital letters about 2.2 %
            of the image height (24 px at 1080p; see
            :func:`~sapiens_mm.visualization.legend.text_label`).
            None: the skeleton's colours.

    Returns:
        (H, W, 3) uint8 BGR drawing.
    """
    canvas = np.ascontiguousarray(img, dtype=np.uint8).copy()
    keypoints = np.asarray(keypoints, np.float32).reshape(
        -1, int(dataset_meta['num_keypoints']), 2)
    keypoint_scores = np.asarray(keypoint_scores,
                                 np.float32).reshape(keypoints.shape[:2])
    radius = radius or _auto_size(canvas.shape, 6)
    thickness = thickness or _auto_size(canvas.shape, 3)
    small_radius = max(1, radius // 2)
    small = np.zeros(keypoints.shape[1], bool)
    small[_detail_keypoints(dataset_meta)] = True
    kpt_colors = np.asarray(dataset_meta.get('keypoint_colors', []))
    links = dataset_meta.get('skeleton_links', []) or []
    link_colors = np.asarray(dataset_meta.get('skeleton_link_colors', []))
    ids = None if track_ids is None else [int(i) for i in track_ids]
    if bboxes is not None:
        for n, box in enumerate(np.asarray(bboxes).reshape(-1, 4)):
            x1, y1, x2, y2 = [int(round(float(v))) for v in box]
            color = bbox_color if ids is None else track_color(ids[n])
            cv2.rectangle(canvas, (x1, y1), (x2, y2), color,
                          max(1, thickness // 2))
    for n, (kpts, scores) in enumerate(zip(keypoints, keypoint_scores)):
        visible = scores >= kpt_thr
        person = None if ids is None else track_color(ids[n])
        for j, (a, b) in enumerate(links):
            if not (visible[a] and visible[b]):
                continue
            color = rgb_to_bgr(link_colors[j]) if len(link_colors) > j else (
                255, 255, 255)
            color = color if person is None else person
            width = max(1, thickness // 2) if (small[a] or small[b]) \
                else thickness
            cv2.line(canvas, tuple(int(round(v)) for v in kpts[a]),
                     tuple(int(round(v)) for v in kpts[b]), color, width,
                     cv2.LINE_AA)
        for k in np.flatnonzero(visible):
            color = rgb_to_bgr(kpt_colors[k]) if len(kpt_colors) > k else (0, 0,
                                                                     255)
            color = color if person is None else person
            cv2.circle(canvas, tuple(int(round(v)) for v in kpts[k]),
                       small_radius if small[k] else radius, color, -1,
                       cv2.LINE_AA)
    if ids is not None:  # on top of the skeletons, to stay readable
        boxes = None if bboxes is None else np.asarray(bboxes).reshape(-1, 4)
        for n, track_id in enumerate(ids):
            if track_id < 0:
                continue
            if boxes is not None:
                anchor = boxes[n, :2]
            else:  # above the person's highest drawn keypoint
                seen = keypoint_scores[n] >= kpt_thr
                seen &= np.isfinite(keypoints[n]).all(-1)
                if not seen.any():
                    continue
                anchor = (keypoints[n, seen, 0].min(),
                          keypoints[n, seen, 1].min() - radius)
            text_label(canvas, f'ID {track_id}', anchor,
                       track_color(track_id))
    return canvas
