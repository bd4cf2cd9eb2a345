"""Drawing body-part segmentations (OpenCV, BGR uint8): part colours
blended over the image, with a legend of the parts present, in the
vocabulary's palette (package data, RGB)."""
from typing import List, Mapping, Optional, Sequence, Tuple, Union

import cv2
import numpy as np

from sapiens_mm.datasets.metainfo import load_body_part_classes

from .color import rgb_to_bgr
from .legend import display_size

__all__ = ['draw_seg']


def _legend(height: int, entries: List[Tuple[str, Sequence[int]]],
            all_names: Sequence[str],
            image_width: Optional[int] = None) -> np.ndarray:
    """A white panel listing (name, RGB colour) entries, ``height`` tall.

    Its width and row height depend only on ``all_names`` (the vocabulary)
    and the image's size, so every frame of a video gets the same panel
    size. The rows are sized for the picture as it is shown
    (:func:`~sapiens_mm.visualization.legend.display_size`): a wide image
    gets larger rows in more columns; an image too small for every row
    lists the first ones.
    """
    n = max(len(all_names), 1)
    ref = display_size(height, image_width)
    columns = max(1, -(-ref // height))
    row = int(np.clip((height - 4) // -(-n // columns), 8,
                      28 * ref / height))
    per_column = max(1, (height - 4) // row)
    columns = min(columns, -(-n // per_column))
    scale = row / 32.0
    text_w = max([
        cv2.getTextSize(name, cv2.FONT_HERSHEY_SIMPLEX, scale, 1)[0][0]
        for name in all_names
    ] or [0])
    column_w = row + 6 + text_w + 6
    panel = np.full((height, column_w * columns, 3), 255, np.uint8)
    thick = max(1, int(round(scale)))
    for i, (name, color) in enumerate(entries[:per_column * columns]):
        column, r = divmod(i, per_column)
        x, y = column * column_w, 2 + r * row
        cv2.rectangle(panel, (x + 3, y + 1), (x + 3 + row - 3, y + row - 2),
                      rgb_to_bgr(color), -1)
        cv2.putText(panel, name, (x + row + 4, y + int(row * 0.75)),
                    cv2.FONT_HERSHEY_SIMPLEX, scale, (0, 0, 0), thick,
                    cv2.LINE_AA)
    return panel


def draw_seg(img: np.ndarray,
             labels: np.ndarray,
             vocab: Union[str, Mapping] = 'goliath_28',
             opacity: float = 0.5,
             legend: bool = True) -> np.ndarray:
    """Blend body-part colours over an image, with a legend.

    Args:
        img: (H, W, 3) uint8 BGR image.
        labels: (H, W) class ids of ``vocab``.
        vocab: ``'goliath_28'`` or ``'lip_cihp_20'``, or a model's
            ``dataset_meta`` with ``classes`` and ``palette`` (RGB).
        opacity: Weight of the part colours (background included). Defaults
            to 0.5 (official demo).
        legend: Append a panel on the right naming the classes present
            (its size depends only on the vocabulary and the image size;
            a wide image gets larger rows in more columns).

    Returns:
        (H, W (+ legend width), 3) uint8 BGR drawing.
    """
    if isinstance(vocab, str):
        info = load_body_part_classes(vocab)
    else:
        info = vocab
        vocab = info.get('vocab', 'the model')
        if not info.get('classes') or info.get('palette') is None:
            raise ValueError(
                'draw_seg needs the classes and palette of the model; its '
                'dataset_meta has none: give vocab="goliath_28" or '
                '"lip_cihp_20".')
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
    panel = _legend(canvas.shape[0], entries, info['classes'],
                    canvas.shape[1])
    return np.concatenate([canvas, panel], axis=1)
