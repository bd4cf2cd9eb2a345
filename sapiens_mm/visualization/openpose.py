"""ControlNet-style OpenPose skeleton images.

:func:`draw_openpose` draws people as ControlNet's openpose pre-processors
do (the images its openpose models are conditioned on): on a black canvas,
the 18-point COCO body as coloured ellipses (17 limbs, the OpenPose colour
wheel at 60 % brightness) with full-colour joints, hands as lines coloured
round the HSV hue circle with blue joints, and the face as white dots. Any
pose layout with keypoint names converts (COCO-17, COCO-WholeBody-133,
Goliath-308; see :mod:`sapiens_mm.datasets.keypoint_formats`); points that a
layout lacks or that score under the threshold are not drawn.

Colours are defined in RGB, as ControlNet's canvases are; the returned image
is BGR like the rest of :mod:`sapiens_mm` drawings, so ``cv2.imwrite`` writes
the ControlNet colours.
"""
import colorsys
import math
from typing import Literal, Optional, Sequence, Tuple

import cv2
import numpy as np

from sapiens_mm.datasets.keypoint_formats import OPENPOSE_PARTS, convert_keypoints

__all__ = ['draw_openpose', 'OPENPOSE_LIMBS', 'OPENPOSE_COLORS',
           'OPENPOSE_HAND_EDGES', 'SKELETON_STYLES', 'SkeletonStyle']

#: How pose results are drawn: over the image in the layout's own colours
#: (:func:`~sapiens_mm.visualization.draw_pose`) or ControlNet-style.
SkeletonStyle = Literal['mmpose', 'openpose']
SKELETON_STYLES: Tuple[str, ...] = ('mmpose', 'openpose')

#: Body limbs of the 18-point OpenPose (COCO-18) layout, 0-based:
#: neck-shoulders, arms, neck-hips, legs, neck-nose, eyes and ears.
OPENPOSE_LIMBS: Tuple[Tuple[int, int], ...] = (
    (1, 2), (1, 5), (2, 3), (3, 4), (5, 6), (6, 7), (1, 8), (8, 9), (9, 10),
    (1, 11), (11, 12), (12, 13), (1, 0), (0, 14), (14, 16), (0, 15),
    (15, 17))
#: RGB colour of body keypoint / limb ``i`` (OpenPose's colour wheel).
OPENPOSE_COLORS: Tuple[Tuple[int, int, int], ...] = (
    (255, 0, 0), (255, 85, 0), (255, 170, 0), (255, 255, 0), (170, 255, 0),
    (85, 255, 0), (0, 255, 0), (0, 255, 85), (0, 255, 170), (0, 255, 255),
    (0, 170, 255), (0, 85, 255), (0, 0, 255), (85, 0, 255), (170, 0, 255),
    (255, 0, 255), (255, 0, 170), (255, 0, 85))
#: Hand edges of the 21-point hand: wrist to each finger, base to tip.
OPENPOSE_HAND_EDGES: Tuple[Tuple[int, int], ...] = tuple(
    edge for f in range(5)
    for edge in [(0, 4 * f + 1)] + [(4 * f + j, 4 * f + j + 1)
                                    for j in range(1, 4)])


def _hand_colors() -> np.ndarray:
    n = len(OPENPOSE_HAND_EDGES)
    return np.array([colorsys.hsv_to_rgb(i / n, 1.0, 1.0) for i in range(n)
                     ]) * 255


def _pt(p) -> Tuple[int, int]:
    return int(round(float(p[0]))), int(round(float(p[1])))


def draw_openpose(keypoints: np.ndarray,
                  scores: np.ndarray,
                  source_names: Sequence[str],
                  canvas_shape: Tuple[int, int],
                  kpt_thr: float = 0.3,
                  hands: bool = True,
                  face: bool = True,
                  size: Optional[int] = None) -> np.ndarray:
    """Draw people's skeletons in the ControlNet OpenPose style.

    Args:
        keypoints: (N, K, 2) keypoints (x, y) in pixels.
        scores: (N, K) scores.
        source_names: (K,) keypoint names of the layout.
        canvas_shape: ``(height, width)`` of the image.
        kpt_thr: Points scoring below this (and their limbs) are not drawn.
            Defaults to 0.3.
        hands: Draw the hands (when the layout has them).
        face: Draw the face (when the layout has it).
        size: Limb half-width and body joint radius in pixels; None scales
            ControlNet's 4 px at 512 px to the canvas.

    Returns:
        (H, W, 3) uint8 BGR image on black.
    """
    h, w = int(canvas_shape[0]), int(canvas_shape[1])
    size = size or max(1, int(round(4 * max(h, w) / 512)))
    parts = {
        layout: convert_keypoints(keypoints, scores, source_names, layout)
        for layout in OPENPOSE_PARTS.values()
    }
    canvas = np.zeros((h, w, 3), np.uint8)  # RGB while drawing
    body_k, body_s = parts['openpose_body18']
    for kpts, scr in zip(body_k, body_s):
        ok = scr >= kpt_thr
        for (a, b), color in zip(OPENPOSE_LIMBS, OPENPOSE_COLORS):
            if not (ok[a] and ok[b]):
                continue
            (xa, ya), (xb, yb) = kpts[a], kpts[b]
            length = math.hypot(xa - xb, ya - yb)
            angle = math.degrees(math.atan2(yb - ya, xb - xa))
            poly = cv2.ellipse2Poly(
                _pt(((xa + xb) / 2, (ya + yb) / 2)),
                (int(round(length / 2)), size), int(round(angle)), 0, 360, 1)
            cv2.fillConvexPoly(canvas, poly,
                               [int(round(c * 0.6)) for c in color])
    for kpts, scr in zip(body_k, body_s):
        for k in np.flatnonzero(scr >= kpt_thr):
            cv2.circle(canvas, _pt(kpts[k]), size, OPENPOSE_COLORS[k], -1)
    if hands:
        hand_colors = _hand_colors()
        line = max(1, size // 2)
        for layout in ('openpose_hand_left', 'openpose_hand_right'):
            for kpts, scr in zip(*parts[layout]):
                ok = scr >= kpt_thr
                for (a, b), color in zip(OPENPOSE_HAND_EDGES, hand_colors):
                    if ok[a] and ok[b]:
                        cv2.line(canvas, _pt(kpts[a]), _pt(kpts[b]),
                                 [float(c) for c in color], line)
                for k in np.flatnonzero(ok):
                    cv2.circle(canvas, _pt(kpts[k]), size, (0, 0, 255), -1)
    if face:
        radius = max(1, int(round(size * 0.75)))
        for kpts, scr in zip(*parts['openpose_face70']):
            for k in np.flatnonzero(scr >= kpt_thr):
                cv2.circle(canvas, _pt(kpts[k]), radius, (255, 255, 255), -1)
    return np.ascontiguousarray(canvas[..., ::-1])
