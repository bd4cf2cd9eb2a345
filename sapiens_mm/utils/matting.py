"""What users make of a predicted matte: alpha PNGs, RGBA cut-outs,
composites and temporally steadier alpha for videos.

A Sapiens2 matte is a pre-multiplied foreground ``F_pre = alpha * F`` (RGB)
and an alpha, both in [0, 1]. All images here are OpenCV's BGR uint8 unless
said otherwise; mattes are float arrays as the model returns them.
"""
import re
from typing import Optional, Sequence, Tuple, Union

import cv2
import numpy as np

from .foreground import rgba_cutout

__all__ = ['alpha_to_png', 'save_alpha', 'unpremultiply', 'matting_cutout',
           'composite', 'parse_color', 'AlphaStabilizer']

#: Colour names accepted by :func:`parse_color` (RGB).
COLORS = dict(green=(0, 177, 64), blue=(0, 71, 187), white=(255, 255, 255),
              black=(0, 0, 0), gray=(128, 128, 128), grey=(128, 128, 128),
              red=(255, 0, 0))


def alpha_to_png(alpha: np.ndarray, bits: int = 8) -> np.ndarray:
    """Alpha in [0, 1] as the integer image a PNG stores.

    Args:
        alpha: (H, W) alpha (clipped to [0, 1]; NaN becomes 0).
        bits: 8 (uint8, steps of 1/255) or 16 (uint16, steps of 1/65535).

    Returns:
        (H, W) uint8 or uint16, ``round(alpha * (2^bits - 1))``.
    """
    if bits not in (8, 16):
        raise ValueError(f'An alpha PNG has 8 or 16 bits, got {bits}.')
    top = 255.0 if bits == 8 else 65535.0
    a = np.clip(np.nan_to_num(np.asarray(alpha, np.float64)), 0.0, 1.0)
    return np.rint(a * top).astype(np.uint8 if bits == 8 else np.uint16)


def save_alpha(path: str, alpha: np.ndarray, bits: int = 8) -> None:
    """Write alpha as a grey 8- or 16-bit PNG (:func:`alpha_to_png`).

    Raises:
        OSError: The file cannot be written.
    """
    if not cv2.imwrite(str(path), alpha_to_png(alpha, bits)):
        raise OSError(f'Cannot write {path}.')


def unpremultiply(fg_pre: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """The foreground colour ``F = F_pre / alpha`` where alpha > 0 (clipped
    to [0, 1]), 0 where alpha is 0.

    Args:
        fg_pre: (H, W, 3) pre-multiplied foreground in [0, 1].
        alpha: (H, W) alpha in [0, 1].

    Returns:
        (H, W, 3) float32.
    """
    fg_pre = np.asarray(fg_pre, np.float32)
    alpha = np.asarray(alpha, np.float32)
    if fg_pre.shape != alpha.shape + (3, ):
        raise ValueError(f'fg_pre {fg_pre.shape} must be alpha '
                         f'{alpha.shape} plus 3 channels.')
    out = np.zeros_like(fg_pre)
    on = alpha > 0
    out[on] = np.clip(fg_pre[on] / alpha[on][:, None], 0.0, 1.0)
    return out


def matting_cutout(fg_pre: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """RGBA cut-out of the predicted person: the un-pre-multiplied
    foreground (:func:`unpremultiply`) with alpha, as BGRA uint8 (what
    ``cv2.imwrite`` stores as a PNG with transparency).

    Args:
        fg_pre: (H, W, 3) pre-multiplied foreground RGB in [0, 1].
        alpha: (H, W) alpha in [0, 1].

    Returns:
        (H, W, 4) uint8 BGRA.
    """
    fg = unpremultiply(fg_pre, alpha)
    bgr = np.rint(fg[..., ::-1] * 255.0).astype(np.uint8)
    return rgba_cutout(bgr, alpha)


def parse_color(spec: str) -> Tuple[int, int, int]:
    """An RGB colour from a name (``green``, ``white``...), ``#RRGGBB`` or
    ``R,G,B`` (0-255).

    Raises:
        ValueError: ``spec`` is none of these (the message lists them).
    """
    text = spec.strip().lower()
    if text in COLORS:
        return COLORS[text]
    m = re.fullmatch(r'#?([0-9a-f]{6})', text)
    if m and (text.startswith('#') or not text.isdigit()):
        v = m.group(1)
        return tuple(int(v[i:i + 2], 16) for i in (0, 2, 4))
    parts = text.split(',')
    if len(parts) == 3 and all(p.strip().isdigit() for p in parts):
        rgb = tuple(int(p) for p in parts)
        if all(0 <= c <= 255 for c in rgb):
            return rgb
    raise ValueError(
        f'Background colour {spec!r} is not a colour: give a name '
        f'({", ".join(sorted(COLORS))}), #RRGGBB or R,G,B (0-255), or an '
        'image file.')


def composite(fg_pre: np.ndarray, alpha: np.ndarray,
              background: Union[Sequence[int], np.ndarray]) -> np.ndarray:
    """The person over a new background: ``F_pre + (1 - alpha) B``,
    clamped, as Sapiens2's post-processing composites.

    Args:
        fg_pre: (H, W, 3) pre-multiplied foreground RGB in [0, 1].
        alpha: (H, W) alpha in [0, 1].
        background: An RGB colour (3 ints, 0-255) or a BGR uint8 image of
            any size (resized bilinearly to the matte).

    Returns:
        (H, W, 3) uint8 BGR.
    """
    fg_pre = np.asarray(fg_pre, np.float32)
    alpha = np.asarray(alpha, np.float32)
    h, w = alpha.shape
    if isinstance(background, np.ndarray) and background.ndim == 3:
        bg = background[..., :3]
        if bg.shape[:2] != (h, w):
            bg = cv2.resize(bg, (w, h), interpolation=cv2.INTER_LINEAR)
        bg = bg[..., ::-1].astype(np.float32) / 255.0
    else:
        rgb = np.asarray(background, np.float32).reshape(3)
        bg = np.broadcast_to(rgb / 255.0, (h, w, 3))
    out = np.clip(fg_pre + (1.0 - alpha[..., None]) * bg, 0.0, 1.0)
    return np.rint(out[..., ::-1] * 255.0).astype(np.uint8)


class AlphaStabilizer:
    """Temporal smoothing of a video's alpha mattes.

    Per pixel, an exponential moving average whose weight on the new frame
    grows with how much the pixel changed: ``w = min(1, momentum_floor +
    |a_t - s_{t-1}| / motion)``, ``s_t = w a_t + (1 - w) s_{t-1}``. Small
    frame-to-frame flicker (changes well below ``motion``) is averaged
    away; a real movement (a change of ``motion`` or more) is followed at
    once, so moving edges do not trail.

    Args:
        floor: Weight of the new frame for an unchanged pixel, in (0, 1].
            Defaults to 0.3.
        motion: Change (in alpha units) that is followed without smoothing.
            Defaults to 0.3.
    """

    def __init__(self, floor: float = 0.3, motion: float = 0.3) -> None:
        if not 0 < floor <= 1:
            raise ValueError(f'floor must be in (0, 1], got {floor}.')
        if motion <= 0:
            raise ValueError(f'motion must be positive, got {motion}.')
        self.floor = float(floor)
        self.motion = float(motion)
        self.state: Optional[np.ndarray] = None

    def reset(self) -> None:
        """Forget the previous frames (a new video or a scene cut)."""
        self.state = None

    def __call__(self, alpha: np.ndarray) -> np.ndarray:
        """The smoothed (H, W) float32 alpha of the next frame."""
        alpha = np.asarray(alpha, np.float32)
        if self.state is None or self.state.shape != alpha.shape:
            self.state = alpha.copy()
            return alpha
        change = np.abs(alpha - self.state)
        w = np.minimum(1.0, self.floor + change / self.motion)
        self.state = w * alpha + (1.0 - w) * self.state
        return self.state.copy()
