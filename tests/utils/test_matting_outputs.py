"""User outputs of a matte on exact arrays: alpha PNGs (8 / 16-bit round
trip), un-pre-multiplied RGBA cut-outs, composites onto a colour or an
image, colour parsing and temporal alpha stabilisation."""
import cv2
import numpy as np
import pytest

from sapiens_mm.datasets.transforms import read_alpha
from sapiens_mm.utils.matting import (
    AlphaStabilizer,
    alpha_to_png,
    composite,
    matting_cutout,
    parse_color,
    save_alpha,
    unpremultiply,
)


@pytest.mark.parametrize('bits,step', [(8, 1 / 255), (16, 1 / 65535)])
def test_alpha_png_round_trip(tmp_path, bits, step):
    alpha = np.linspace(0, 1, 64 * 3).reshape(3, 64)
    path = tmp_path / f'a{bits}.png'
    save_alpha(str(path), alpha, bits)
    stored = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    assert stored.dtype == (np.uint8 if bits == 8 else np.uint16)
    back = read_alpha(path.read_bytes(), str(path))
    assert np.abs(back - alpha).max() <= step / 2 + 1e-7
    # the stored integers are exactly round(alpha * max)
    assert np.array_equal(stored, alpha_to_png(alpha, bits))
    assert np.array_equal(alpha_to_png(np.array([[0.5]]), 8), [[128]])
    with pytest.raises(ValueError, match='8 or 16'):
        alpha_to_png(alpha, 12)


def test_unpremultiply_and_cutout_exact():
    alpha = np.array([[0.0, 0.5, 1.0, 0.25]], np.float32)
    fg = np.array([[[0.2, 0.4, 0.6], [0.8, 0.4, 0.2], [1.0, 0.0, 0.5],
                    [0.2, 0.2, 0.4]]], np.float32)
    fg_pre = fg * alpha[..., None]
    fg_pre[0, 0] = 0.3  # junk where alpha = 0: dropped
    out = unpremultiply(fg_pre, alpha)
    assert np.allclose(out[0, 1:], fg[0, 1:], atol=1e-7)
    assert np.array_equal(out[0, 0], [0, 0, 0])
    # a pre-multiplied value above alpha is clipped to 1
    assert unpremultiply(np.full((1, 1, 3), 0.6, np.float32),
                         np.full((1, 1), 0.5, np.float32)).max() == 1.0
    rgba = matting_cutout(fg_pre, alpha)
    assert rgba.dtype == np.uint8 and rgba.shape == (1, 4, 4)
    # BGRA: colours reversed, alpha * 255 rounded
    assert np.array_equal(rgba[0, :, 3], [0, 128, 255, 64])
    assert np.array_equal(rgba[0, 2, :3], [128, 0, 255])
    assert np.array_equal(rgba[0, 1, :3], [51, 102, 204])


def test_composite_on_colour_and_image():
    alpha = np.array([[0.0, 0.5, 1.0]], np.float32)
    fg_pre = np.array([[[0, 0, 0], [0.5, 0.0, 0.25], [1.0, 1.0, 1.0]]],
                      np.float32)
    green = parse_color('green')
    out = composite(fg_pre, alpha, green)  # BGR
    # F_pre + (1 - a) B, in RGB then reversed
    expected_rgb = np.clip(fg_pre + (1 - alpha[..., None]) *
                           np.array(green) / 255.0, 0, 1)
    assert np.array_equal(out, np.rint(expected_rgb[..., ::-1] *
                                       255).astype(np.uint8))
    assert np.array_equal(out[0, 0], [64, 177, 0])  # background shows
    assert np.array_equal(out[0, 2], [255, 255, 255])  # person only
    bg = np.zeros((2, 6, 3), np.uint8)
    bg[..., 2] = 200  # red in BGR, any size: resized
    img = composite(fg_pre, alpha, bg)
    assert np.array_equal(img[0, 0], [0, 0, 200])
    assert np.array_equal(img[0, 1], [64, 0, 228])  # R: .5 + .5*200/255


def test_parse_color():
    assert parse_color('#FF8000') == (255, 128, 0)
    assert parse_color('10, 20,30') == (10, 20, 30)
    assert parse_color('White') == (255, 255, 255)
    for bad in ('purpleish', '300,0,0', '#12345'):
        with pytest.raises(ValueError, match='not a colour'):
            parse_color(bad)


def test_alpha_stabilizer_damps_flicker_follows_motion():
    rng = np.random.default_rng(0)
    base = np.full((8, 8), 0.5, np.float32)
    stab = AlphaStabilizer(floor=0.3, motion=0.3)
    raw, smooth = [], []
    for _ in range(30):
        frame = base + rng.uniform(-0.03, 0.03, base.shape).astype(
            np.float32)
        raw.append(frame)
        smooth.append(stab(frame))
    jitter_raw = np.abs(np.diff(raw, axis=0)).mean()
    jitter_smooth = np.abs(np.diff(smooth[5:], axis=0)).mean()
    assert jitter_smooth < 0.5 * jitter_raw
    jump = np.full_like(base, 1.0)  # the person moved in: follow at once
    assert np.allclose(stab(jump), 1.0, atol=0.02)
