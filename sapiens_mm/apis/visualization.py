"""Drawing Sapiens predictions on images (OpenCV, BGR uint8).

* :func:`draw_pose`: boxes, skeleton links and keypoints in the colours of
  the skeleton's metainfo (COCO 17, COCO-WholeBody 133 or Goliath 308). Face
  and hand points of the dense layouts are drawn smaller than body points.
* :func:`draw_seg`: body-part colours blended over the image, with a legend
  of the parts present, in the vocabulary's palette (package data).
* :func:`colorize_depth`: inferno colour map of the relative depth (near is
  bright), background black.
* :func:`colorize_normal`: surface normals as RGB, ``(n + 1) / 2 * 255``.

Colours in the metainfo and palettes are RGB (the OpenMMLab convention);
images here are BGR like ``cv2.imread``.
"""
from typing import List, Optional, Sequence, Tuple

import cv2
import numpy as np

from sapiens_mm.datasets.metainfo import load_body_part_classes

__all__ = [
    'skeleton_name', 'vocab_for_num_classes', 'draw_pose', 'draw_seg',
    'colorize_depth', 'colorize_normal'
]

_VOCABS = {28: 'goliath_28', 20: 'lip_cihp_20'}


def skeleton_name(dataset_meta: dict) -> str:
    """Name of a pose skeleton: the metainfo's ``dataset_name`` (``'coco'``,
    ``'coco_wholebody'``, ``'goliath'``) or ``'<K>_keypoints'``."""
    name = dataset_meta.get('dataset_name')
    return str(name) if name else f'{dataset_meta["num_keypoints"]}_keypoints'


def vocab_for_num_classes(num_classes: int) -> str:
    """Body-part vocabulary of a segmentation model with ``num_classes``.

    Raises:
        ValueError: No shipped vocabulary has that many classes.
    """
    if num_classes not in _VOCABS:
        raise ValueError(
            f'No body-part vocabulary has {num_classes} classes; the shipped '
            f'ones have {sorted(_VOCABS)} ({list(_VOCABS.values())}).')
    return _VOCABS[num_classes]


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


def _bgr(color) -> Tuple[int, int, int]:
    c = [int(v) for v in np.asarray(color).reshape(-1)[:3]]
    return c[2], c[1], c[0]


def draw_pose(img: np.ndarray,
              keypoints: np.ndarray,
              keypoint_scores: np.ndarray,
              dataset_meta: dict,
              bboxes: Optional[np.ndarray] = None,
              kpt_thr: float = 0.3,
              radius: Optional[int] = None,
              thickness: Optional[int] = None,
              bbox_color: Tuple[int, int, int] = (0, 255, 0)) -> np.ndarray:
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
    if bboxes is not None:
        for box in np.asarray(bboxes).reshape(-1, 4):
            x1, y1, x2, y2 = [int(round(float(v))) for v in box]
            cv2.rectangle(canvas, (x1, y1), (x2, y2), bbox_color,
                          max(1, thickness // 2))
    for kpts, scores in zip(keypoints, keypoint_scores):
        visible = scores >= kpt_thr
        for j, (a, b) in enumerate(links):
            if not (visible[a] and visible[b]):
                continue
            color = _bgr(link_colors[j]) if len(link_colors) > j else (
                255, 255, 255)
            width = max(1, thickness // 2) if (small[a] or small[b]) \
                else thickness
            cv2.line(canvas, tuple(int(round(v)) for v in kpts[a]),
                     tuple(int(round(v)) for v in kpts[b]), color, width,
                     cv2.LINE_AA)
        for k in np.flatnonzero(visible):
            color = _bgr(kpt_colors[k]) if len(kpt_colors) > k else (0, 0,
                                                                     255)
            cv2.circle(canvas, tuple(int(round(v)) for v in kpts[k]),
                       small_radius if small[k] else radius, color, -1,
                       cv2.LINE_AA)
    return canvas


def _legend(height: int, entries: List[Tuple[str, Sequence[int]]],
            all_names: Sequence[str]) -> np.ndarray:
    """A white panel listing (name, RGB colour) entries, ``height`` tall.

    Its width and row height depend only on ``all_names`` (the vocabulary)
    and ``height``, so every frame of a video gets the same panel size.
    """
    row = int(np.clip(height // max(len(all_names), 1), 8, 28))
    scale = row / 32.0
    text_w = max([
        cv2.getTextSize(name, cv2.FONT_HERSHEY_SIMPLEX, scale, 1)[0][0]
        for name in all_names
    ] or [0])
    width = row + 6 + text_w + 6
    panel = np.full((height, width, 3), 255, np.uint8)
    for i, (name, color) in enumerate(entries):
        y = 2 + i * row
        if y + row > height:
            break
        cv2.rectangle(panel, (3, y + 1), (3 + row - 3, y + row - 2),
                      _bgr(color), -1)
        cv2.putText(panel, name, (row + 4, y + int(row * 0.75)),
                    cv2.FONT_HERSHEY_SIMPLEX, scale, (0, 0, 0), 1,
                    cv2.LINE_AA)
    return panel


def draw_seg(img: np.ndarray,
             labels: np.ndarray,
             vocab: str = 'goliath_28',
             opacity: float = 0.5,
             legend: bool = True) -> np.ndarray:
    """Blend body-part colours over an image, with a legend.

    Args:
        img: (H, W, 3) uint8 BGR image.
        labels: (H, W) class ids of ``vocab``.
        vocab: ``'goliath_28'`` or ``'lip_cihp_20'``.
        opacity: Weight of the part colours (background included). Defaults
            to 0.5 (official demo).
        legend: Append a panel on the right naming the classes present
            (its size depends only on the vocabulary and the image height).

    Returns:
        (H, W (+ legend width), 3) uint8 BGR drawing.
    """
    info = load_body_part_classes(vocab)
    palette = np.asarray(info['palette'], np.uint8)[:, ::-1]  # to BGR
    labels = np.asarray(labels)
    if labels.shape != img.shape[:2]:
        raise ValueError(f'labels {labels.shape} and image '
                         f'{img.shape[:2]} differ in size.')
    if labels.size and labels.max() >= len(palette):
        raise ValueError(f'labels go up to {labels.max()} but {vocab} has '
                         f'{len(palette)} classes.')
    colored = palette[labels]
    canvas = cv2.addWeighted(
        np.ascontiguousarray(img, np.uint8), 1 - opacity, colored, opacity, 0)
    if not legend:
        return canvas
    present = np.unique(labels)
    entries = [(info['classes'][c], info['palette'][c]) for c in present]
    panel = _legend(canvas.shape[0], entries, info['classes'])
    return np.concatenate([canvas, panel], axis=1)


def _valid(values: np.ndarray, mask: Optional[np.ndarray]) -> np.ndarray:
    valid = np.isfinite(values)
    if valid.ndim == 3:
        valid = valid.all(axis=-1)
    if mask is not None:
        valid &= np.asarray(mask, bool)
    return valid


def colorize_depth(depth: np.ndarray,
                   mask: Optional[np.ndarray] = None) -> np.ndarray:
    """Inferno colour map of a relative depth map (near = bright).

    The depth is min-max normalised over the valid pixels (finite and inside
    ``mask``), inverted so that near is bright, and colour-mapped; other
    pixels are black.

    Args:
        depth: (H, W) depth (larger = farther).
        mask: (H, W) foreground, or None for all finite pixels.

    Returns:
        (H, W, 3) uint8 BGR.
    """
    depth = np.asarray(depth, np.float32)
    valid = _valid(depth, mask)
    out = np.zeros(depth.shape + (3, ), np.uint8)
    if not valid.any():
        return out
    d = depth[valid]
    lo, hi = float(d.min()), float(d.max())
    norm = (d - lo) / (hi - lo) if hi > lo else np.zeros_like(d)
    gray = np.round((1.0 - norm) * 255).astype(np.uint8)
    colored = cv2.applyColorMap(gray.reshape(-1, 1), cv2.COLORMAP_INFERNO)
    out[valid] = colored.reshape(-1, 3)
    return out


def colorize_normal(normal: np.ndarray,
                    mask: Optional[np.ndarray] = None) -> np.ndarray:
    """Surface normals as colours: RGB = ``(n + 1) / 2 * 255``.

    Args:
        normal: (H, W, 3) unit normals (x, y, z).
        mask: (H, W) foreground, or None for all finite pixels.

    Returns:
        (H, W, 3) uint8 BGR; invalid pixels black.
    """
    normal = np.asarray(normal, np.float32)
    valid = _valid(normal, mask)
    rgb = np.clip((np.nan_to_num(normal) + 1.0) * 0.5 * 255.0, 0, 255)
    out = np.round(rgb).astype(np.uint8)[..., ::-1].copy()
    out[~valid] = 0
    return out
