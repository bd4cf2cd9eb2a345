"""Person foreground from body-part segmentation: a soft mask and RGBA
cut-outs.

* :func:`soft_foreground`: per-pixel probability of "not background" from
  the segmentation logits (``1 - softmax(logits)[background]``), a soft
  alpha that follows hair and clothing edges better than the argmax labels.
* :func:`rgba_cutout`: the image with that alpha (BGRA, as ``cv2.imwrite``
  writes PNG with transparency).
* :func:`person_cutouts`: one cut-out per person box (e.g. the pose
  detector's), cropped to the box; people who overlap share the pixels of
  the overlap, since body-part segmentation does not tell people apart.
"""
from typing import List, Sequence, Tuple

import numpy as np

__all__ = ['soft_foreground', 'rgba_cutout', 'person_cutouts']


def soft_foreground(seg_logits: np.ndarray,
                    background_index: int = 0) -> np.ndarray:
    """Soft person mask from segmentation logits.

    Args:
        seg_logits: (C, H, W) class logits (C >= 2).
        background_index: The background class. Defaults to 0.

    Returns:
        (H, W) float32 probability that a pixel is not background, in
        [0, 1].
    """
    logits = np.asarray(seg_logits, np.float64)
    if logits.ndim != 3 or logits.shape[0] < 2:
        raise ValueError(f'seg_logits must be (C, H, W) with C >= 2, got '
                         f'{logits.shape}.')
    # log-sum-exp of the person classes against the background, stably
    bg = logits[background_index]
    rest = np.delete(logits, background_index, axis=0)
    top = np.maximum(rest.max(0), bg)
    person = np.exp(rest - top).sum(0)
    return (person / (person + np.exp(bg - top))).astype(np.float32)


def rgba_cutout(image: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """The image with an alpha channel.

    Args:
        image: (H, W, 3) uint8 BGR.
        alpha: (H, W) alpha in [0, 1].

    Returns:
        (H, W, 4) uint8 BGRA.
    """
    image = np.asarray(image, np.uint8)
    alpha = np.asarray(alpha, np.float32)
    if alpha.shape != image.shape[:2]:
        raise ValueError(f'alpha {alpha.shape} and image {image.shape[:2]} '
                         'differ in size.')
    a = np.round(np.clip(np.nan_to_num(alpha), 0, 1) * 255).astype(np.uint8)
    return np.concatenate([image[..., :3], a[..., None]], axis=-1)


def person_cutouts(image: np.ndarray, alpha: np.ndarray,
                   bboxes: Sequence[Sequence[float]]
                   ) -> List[Tuple[np.ndarray, Tuple[int, int, int, int]]]:
    """One RGBA cut-out per person box.

    Args:
        image: (H, W, 3) uint8 BGR.
        alpha: (H, W) soft foreground in [0, 1].
        bboxes: (N, 4) boxes (x1, y1, x2, y2) in pixels.

    Returns:
        ``[(cutout, (x1, y1, x2, y2)), ...]``: (h, w, 4) BGRA crops of the
        boxes (rounded outwards and clipped to the image; empty boxes are
        left out) and the integer boxes they cover (x2, y2 exclusive).
    """
    full = rgba_cutout(image, alpha)
    h, w = full.shape[:2]
    out = []
    for box in np.asarray(bboxes, np.float64).reshape(-1, 4):
        x1, y1 = (int(np.clip(np.floor(v), 0, n)) for v, n in
                  ((box[0], w), (box[1], h)))
        x2, y2 = (int(np.clip(np.ceil(v), 0, n)) for v, n in
                  ((box[2], w), (box[3], h)))
        if x2 > x1 and y2 > y1:
            out.append((full[y1:y2, x1:x2].copy(), (x1, y1, x2, y2)))
    return out
