"""Keys drawn next to dense visualisations, captions, and readable text
labels.

* :func:`depth_colorbar`: the depth colour map as a vertical bar, near at
  the top, with the near and far values (metres when metric);
* :func:`normal_key`: a sphere coloured by its own surface normals, so a
  colour in the normal map reads as the direction the surface faces;
* :func:`matting_key`: how alpha blends the person into the background;
* :func:`add_caption`: lines of text under a picture and its key (which
  model drew it, which person boxes it used);
* :func:`text_label`: text on a filled box, sized for the image.

Panels are BGR uint8 with the image's height, to be put on the right of the
image (as the body-part legend of :func:`~sapiens_mm.visualization.draw_seg`
is). Their text is sized for the picture as it is shown: a picture is
scaled to fit a window or page, so a wide image gets larger text and wider
keys (:func:`display_size`).
"""
from typing import Optional, Sequence, Tuple, Union

import cv2
import numpy as np

__all__ = ['depth_colorbar', 'normal_key', 'matting_key', 'text_label',
           'panel_width', 'font_scale', 'display_size', 'caption_lines',
           'add_caption', 'DEPTH_COLORMAP']

#: OpenCV colour map of depth images.
DEPTH_COLORMAP = cv2.COLORMAP_INFERNO
_FONT = cv2.FONT_HERSHEY_SIMPLEX
_PANEL_BG = (40, 40, 40)
_TEXT = (255, 255, 255)


def display_size(height: int, width: Optional[int] = None) -> int:
    """The height a picture's text is sized for: its height, or for a wide
    picture three quarters of its width (shown scaled to fit a window or a
    page, a 3:1 panorama shrinks twice as much as a 3:2 photo of the same
    height, and its keys must grow as much to stay readable)."""
    return int(max(height, round((width or 0) * 0.75)))


def font_scale(height: int, width: Optional[int] = None) -> float:
    """OpenCV font scale for keys on an image ``height`` pixels tall (and
    ``width`` wide: see :func:`display_size`): capital letters about 1.9 %
    of that size (20 px at 1080p), at least scale 0.35 (8 px)."""
    return max(0.35, display_size(height, width) / 1080 * 0.9)


def panel_width(height: int, width: Optional[int] = None) -> int:
    """Width of a key panel next to an image ``height`` pixels tall (and
    ``width`` wide: see :func:`display_size`)."""
    return int(max(72, round(display_size(height, width) * 0.2)))


def _fit_scale(texts, width: int, scale: float) -> float:
    """``scale`` reduced until every text fits ``width`` pixels."""
    widest = max(cv2.getTextSize(t, _FONT, scale, 1)[0][0] for t in texts)
    return scale * min(1.0, width / max(widest, 1))


def _put(panel: np.ndarray, text: str, centre_x: int, baseline: int,
         scale: float) -> None:
    """White text centred at ``centre_x``, outlined in black (readable on
    the panel and on the colours of the keys)."""
    thick = max(1, int(round(scale * 2)))
    (w, _), _ = cv2.getTextSize(text, _FONT, scale, thick)
    org = (int(centre_x - w / 2), int(baseline))
    cv2.putText(panel, text, org, _FONT, scale, (0, 0, 0), thick + 2,
                cv2.LINE_AA)
    cv2.putText(panel, text, org, _FONT, scale, _TEXT, thick, cv2.LINE_AA)


def text_label(img: np.ndarray, text: str, anchor: Tuple[float, float],
               color: Tuple[int, int, int],
               scale: Optional[float] = None) -> None:
    """Write ``text`` on a box filled with ``color`` (black or white text,
    whichever contrasts more) with a black edge, its bottom-left corner at
    ``anchor``, moved inside the image; drawn in place.

    Args:
        img: (H, W, 3) uint8 BGR image, changed in place.
        text: The label.
        anchor: (x, y) pixel of the label's bottom-left corner.
        color: BGR fill colour.
        scale: OpenCV font scale; None: :func:`font_scale` of the image.
    """
    h, w = img.shape[:2]
    scale = font_scale(h) * 1.2 if scale is None else scale
    thick = max(1, int(round(scale * 2)))
    (tw, th), base = cv2.getTextSize(text, _FONT, scale, thick)
    pad = max(2, int(round(th * 0.3)))
    bw, bh = tw + 2 * pad, th + base + 2 * pad
    x = int(np.clip(anchor[0], 0, max(0, w - bw)))
    y = int(np.clip(anchor[1], bh, h))  # bottom edge
    cv2.rectangle(img, (x, y - bh), (x + bw, y), tuple(map(int, color)), -1)
    # a dark edge sets the label off from a background of its own colour
    cv2.rectangle(img, (x, y - bh), (x + bw, y), (0, 0, 0),
                  max(1, thick // 2))
    b, g, r = color
    luma = 0.114 * b + 0.587 * g + 0.299 * r
    ink = (0, 0, 0) if luma > 140 else (255, 255, 255)
    cv2.putText(img, text, (x + pad, y - pad - base), _FONT, scale, ink,
                thick, cv2.LINE_AA)


def depth_colorbar(height: int, near: Optional[float], far: Optional[float],
                   metric: bool = False,
                   image_width: Optional[int] = None) -> np.ndarray:
    """The depth colour bar: bright (near) at the top to dark (far) at the
    bottom, as :func:`~sapiens_mm.visualization.colorize_depth` colours.

    Args:
        height: Panel height (the image's).
        near: Depth of the nearest valid pixel (the top colour), or None
            when there is none.
        far: Depth of the farthest valid pixel (the bottom colour).
        metric: The values are metres (labelled ``m``); else relative
            model units (labelled ``relative``).
        image_width: Width of the image beside it (a wide image gets a
            wider panel and larger text, see :func:`display_size`).

    Returns:
        (height, :func:`panel_width`, 3) uint8 BGR panel.
    """
    def value(v):
        if v is None:
            return '-'
        return f'{v:.2f} m' if metric else f'{v:.3g}'

    def colours(n: int) -> np.ndarray:
        ramp = np.linspace(255, 0, n).round().astype(np.uint8)
        return cv2.applyColorMap(ramp.reshape(-1, 1), DEPTH_COLORMAP)

    return _bar_panel(height, image_width, ['near', value(near)],
                      [value(far), 'far' if metric else 'far (relative)'],
                      colours)


def _bar_panel(height: int, image_width: Optional[int],
               lines_top: Sequence[str], lines_bottom: Sequence[str],
               colours) -> np.ndarray:
    """A key panel: two lines of text at the top and two at the bottom, and
    between them a vertical bar whose rows ``colours(n)`` gives ((n, 1, 3)
    or (n, 3) uint8 BGR, top first)."""
    width = panel_width(height, image_width)
    panel = np.full((height, width, 3), _PANEL_BG, np.uint8)
    scale = _fit_scale(list(lines_top) + list(lines_bottom), width - 8,
                       font_scale(height, image_width))
    (_, th), base = cv2.getTextSize('near', _FONT, scale, 1)
    line = th + base + max(2, th // 2)
    top = 4 + 2 * line
    bottom = height - 4 - 2 * line
    cx = width // 2
    for i, text in enumerate(lines_top):
        _put(panel, text, cx, 4 + (i + 1) * line - base, scale)
    for i, text in enumerate(lines_bottom):
        _put(panel, text, cx, bottom + (i + 1) * line - base, scale)
    if bottom - top >= 2:
        bar = np.asarray(colours(bottom - top), np.uint8).reshape(-1, 1, 3)
        x0, x1 = width // 4, width - width // 4
        panel[top:bottom, x0:x1] = bar
    return panel


def normal_key(height: int, colorize,
               image_width: Optional[int] = None) -> np.ndarray:
    """The normal colour key: a sphere seen from the camera, each pixel
    coloured (by ``colorize``) with the sphere's normal there, and the
    directions named: a pixel of the normal map with the colour of the
    sphere's right edge is a surface facing right, and so on.

    Normals are in the camera frame with x right, y down and z away from
    the camera (OpenCV), pointing out of the surface: the sphere's centre,
    facing the camera, is ``(0, 0, -1)``.

    Args:
        height: Panel height (the image's).
        colorize: The function that colours normal maps,
            ``colorize(normals (H, W, 3), mask (H, W)) -> BGR``.
        image_width: Width of the image beside it (see
            :func:`display_size`).

    Returns:
        (height, :func:`panel_width`, 3) uint8 BGR panel.
    """
    width = panel_width(height, image_width)
    panel = np.full((height, width, 3), _PANEL_BG, np.uint8)
    labels = ['faces up', 'faces down', 'left', 'right', 'faces you']
    scale = _fit_scale(labels[:2], width - 8,
                       font_scale(height, image_width))
    (_, th), base = cv2.getTextSize('up', _FONT, scale, 1)
    line = th + base + max(2, th // 2)
    d = int(min(width - 8, height - 4 * line - 8))
    if d < 8:
        return panel
    r = (d - 1) / 2
    ys, xs = np.mgrid[0:d, 0:d].astype(np.float32)
    x, y = (xs - r) / r, (ys - r) / r
    inside = x**2 + y**2 <= 1
    z = -np.sqrt(np.clip(1 - x**2 - y**2, 0, 1))
    sphere = colorize(np.stack([x, y, z], -1), inside)
    top = (height - d) // 2
    left = (width - d) // 2
    region = panel[top:top + d, left:left + d]
    region[inside] = sphere[inside]
    cx = width // 2
    _put(panel, labels[0], cx, top - line // 2 - base + th // 2, scale)
    _put(panel, labels[1], cx, top + d + line - base, scale)
    small = scale * 0.8
    _put(panel, labels[4], cx, top + d // 2 + th // 2, small)
    (lw, _), _ = cv2.getTextSize('left', _FONT, small, 1)
    _put(panel, 'left', left + lw // 2 + 2, top + d // 2 - line, small)
    (rw, _), _ = cv2.getTextSize('right', _FONT, small, 1)
    _put(panel, 'right', left + d - rw // 2 - 2, top + d // 2 - line, small)
    return panel


def matting_key(height: int, background: Union[Sequence[int], np.ndarray],
                image_width: Optional[int] = None) -> np.ndarray:
    """The matting key: a bar from the person (alpha 1, a light grey
    stand-in, at the top) to the background (alpha 0, at the bottom), each
    step composited as the picture is (``alpha F + (1 - alpha) B``), with
    the two ends named.

    Args:
        height: Panel height (the image's).
        background: The background of the picture: an RGB colour, or a BGR
            image (its mean colour is shown, named "image").
        image_width: Width of the image beside it (see
            :func:`display_size`).

    Returns:
        (height, :func:`panel_width`, 3) uint8 BGR panel.
    """
    if isinstance(background, np.ndarray) and background.ndim == 3:
        bg = background[..., :3].reshape(-1, 3).mean(0)  # BGR
        bg_name = 'image'
    else:
        bg = np.asarray(background, np.float32).reshape(3)[::-1]  # to BGR
        bg_name = 'colour'

    def colours(n: int) -> np.ndarray:
        alpha = np.linspace(1.0, 0.0, n, dtype=np.float32)[:, None]
        person = np.full(3, 220.0, np.float32)
        return np.rint(alpha * person + (1.0 - alpha) *
                       np.asarray(bg, np.float32)).astype(np.uint8)

    return _bar_panel(height, image_width, ['person', 'alpha 1'],
                      ['alpha 0', f'bg {bg_name}'], colours)


def caption_lines(lines: Sequence[str], width: int,
                  scale: float) -> Tuple[list, float]:
    """``lines`` wrapped at spaces to fit ``width`` pixels at font ``scale``
    (a word longer than the width shrinks the scale instead).

    Returns:
        ``(wrapped lines, scale)``.
    """
    words = [w for text in lines for w in text.split()]
    if words:
        scale = _fit_scale(words, width - 8, scale)
    wrapped = []
    for text in lines:
        current = ''
        for word in text.split():
            trial = f'{current} {word}'.strip()
            if current and cv2.getTextSize(trial, _FONT, scale,
                                           1)[0][0] > width - 8:
                wrapped.append(current)
                current = word
            else:
                current = trial
        wrapped.append(current)
    return wrapped, scale


def add_caption(img: np.ndarray, lines: Sequence[str]) -> np.ndarray:
    """``img`` (a picture and its key) with a dark strip below it holding
    ``lines`` in white, sized as the keys' text is (:func:`font_scale`),
    wrapped to the picture's width.

    Args:
        img: (H, W, 3) uint8 BGR picture.
        lines: The caption, one entry per line (e.g. the model's name, the
            person boxes' source).

    Returns:
        (H + strip height, W, 3) uint8 BGR; ``img`` itself when ``lines`` is
        empty.
    """
    if not lines:
        return img
    h, w = img.shape[:2]
    wrapped, scale = caption_lines(lines, w, font_scale(h, w))
    thick = max(1, int(round(scale * 2)))
    (_, th), base = cv2.getTextSize('Ag', _FONT, scale, thick)
    line = th + base + max(2, th // 3)
    strip = np.full((line * len(wrapped) + 6, w, 3), _PANEL_BG, np.uint8)
    for i, text in enumerate(wrapped):
        cv2.putText(strip, text, (4, 3 + (i + 1) * line - base), _FONT,
                    scale, _TEXT, thick, cv2.LINE_AA)
    return np.concatenate([np.ascontiguousarray(img, np.uint8), strip], 0)
