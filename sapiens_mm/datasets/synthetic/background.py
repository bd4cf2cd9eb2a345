"""Procedural backgrounds: rooms, outdoor scenes and textures (numpy only).

Rooms and outdoor scenes are ray cast with the same camera as the people,
so the floor, the wall and the horizon are in perspective and the people
stand on the floor (with soft contact shadows).  Texture backgrounds (fractal
noise, stripes/checks, blurred blobs) add variety.  Backgrounds are label
free: depth, normals and masks are 0 there.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Sequence, Tuple

import numpy as np


F32 = np.float32


@lru_cache(maxsize=64)
def _interp_matrix(n_out: int, n_in: int) -> np.ndarray:
    """Linear interpolation matrix (n_out, n_in), align-corners style."""
    pos = np.linspace(0, n_in - 1, n_out)
    i0 = np.clip(np.floor(pos).astype(int), 0, max(n_in - 2, 0))
    w = pos - i0
    m = np.zeros((n_out, n_in), F32)
    m[np.arange(n_out), i0] = 1 - w
    if n_in > 1:
        m[np.arange(n_out), i0 + 1] += w
    return m


def upsample(small: np.ndarray, height: int, width: int) -> np.ndarray:
    """Bilinearly resize a (h, w[, c]) array to (height, width[, c])."""
    my = _interp_matrix(height, small.shape[0])
    mx = _interp_matrix(width, small.shape[1])
    small = small.astype(F32)
    if small.ndim == 2:
        return my @ small @ mx.T
    return np.stack([my @ small[..., c] @ mx.T
                     for c in range(small.shape[2])], -1)


def half_res_camera(K: np.ndarray) -> np.ndarray:
    """Intrinsics of the half-resolution grid of a (H, W) image.

    Low-resolution pixel ``j`` covers full-resolution pixels ``2j`` and
    ``2j + 1`` (centre ``2j + 0.5``), as in a bilinear 2x resize.
    """
    K2 = K.copy()
    K2[0, 0] /= 2
    K2[1, 1] /= 2
    K2[0, 2] = (K[0, 2] + 0.5) / 2 - 0.5
    K2[1, 2] = (K[1, 2] + 0.5) / 2 - 0.5
    return K2


def fractal_noise(rng: np.random.Generator, height: int, width: int,
                  base: int = 3, octaves: int = 4,
                  persistence: float = 0.55) -> np.ndarray:
    """Smooth value noise in about [-1, 1] (sum of upsampled octaves)."""
    out = np.zeros((height, width), F32)
    amp, total = 1.0, 0.0
    for o in range(octaves):
        n = base * 2 ** o
        h = max(2, int(round(n * height / max(height, width))) + 1)
        w = max(2, int(round(n * width / max(height, width))) + 1)
        out += F32(amp) * upsample(rng.uniform(-1, 1, (h, w)), height, width)
        total += amp
        amp *= persistence
    return out * F32(1.7 / total)


def _colour(rng: np.random.Generator, sat=(0.05, 0.6), val=(0.2, 0.95)):
    """Random RGB colour (float32) from hue, saturation and value ranges."""
    h = rng.random()
    s, v = rng.uniform(*sat), rng.uniform(*val)
    k = (np.array([5, 3, 1]) + h * 6) % 6
    return (v - v * s * np.clip(np.minimum(k, 4 - k), 0, 1)).astype(F32)


def _frac(x: np.ndarray) -> np.ndarray:
    """``x mod 1`` without the slow floating-point remainder."""
    return x - np.floor(x)


def _parity(x: np.ndarray) -> np.ndarray:
    """``x mod 2`` of integer-valued floats, as 0.0 / 1.0 (float32)."""
    return (x.astype(np.int64) & 1).astype(F32)


def _mix(c0, c1, t) -> np.ndarray:
    """Planar blend ``c0 -> c1`` with weights ``t`` (h, w).

    ``c0`` / ``c1`` are colours (3,) or planar images (3, h, w); the result
    is a planar float32 image (3, h, w).  Planar layout keeps every numpy
    operation a plain 2D loop (no broadcasting over a channel axis).
    """
    t = t.astype(F32, copy=False)
    out = np.empty((3,) + t.shape, F32)
    for c in range(3):
        a, b = c0[c], c1[c]
        out[c] = a + (b - a) * t
    return out


def _rays_world(K: np.ndarray, R_wc: np.ndarray, height: int, width: int):
    """World-frame ray directions (x, y down, z) of every pixel centre."""
    u = ((np.arange(width) - K[0, 2]) / K[0, 0]).astype(F32)[None, :]
    v = ((np.arange(height) - K[1, 2]) / K[1, 1]).astype(F32)[:, None]
    R = R_wc.astype(F32)
    return [R[i, 0] * u + R[i, 1] * v + R[i, 2] for i in range(3)]


def _shadows(px, pz, people: Sequence[Tuple[float, float, float]]):
    """Soft contact shadows of the people on the floor (multiplier)."""
    f = np.ones_like(px)
    for x, z, r in people:
        f *= 1 - F32(0.45) * np.exp((np.square(px - F32(x)) +
                                     np.square(pz - F32(z))) *
                                    F32(-0.5 / (r * r)))
    return f


def _floor_texture(rng, px, pz, dist, shape):
    """Planar floor texture: tiles, wooden planks or carpet/concrete."""
    kind = rng.integers(3)
    c0 = _colour(rng, (0.05, 0.5), (0.25, 0.85))
    if kind == 0:  # tiles
        ts = F32(1 / rng.uniform(0.3, 1.0))
        t = _parity(np.floor(px * ts) + np.floor(pz * ts))
        c1 = np.clip(c0 * rng.uniform(0.6, 0.9), 0, 1)
    elif kind == 1:  # wooden planks
        c0 = np.array([0.55, 0.36, 0.2], F32) * rng.uniform(0.6, 1.3)
        c1 = c0 * rng.uniform(0.7, 0.9)
        plank = np.floor(px * F32(1 / rng.uniform(0.1, 0.25)))
        t = _frac(np.sin(plank * F32(12.9898)) * F32(43758.5453))
        t = F32(0.6) * t + F32(0.4) * (
            np.sin(pz * F32(rng.uniform(10, 30)) + plank) > 0.6)
    else:  # carpet / concrete
        c1 = np.clip(c0 * rng.uniform(0.7, 1.1), 0, 1)
        noise = fractal_noise(rng, *shape, base=8, octaves=3)
        t = F32(0.5) + F32(0.5) * noise
    fade = np.clip(dist * F32(1 / 25.0), 0, 1)  # far away: average colour
    t = t * (1 - fade) + F32(0.5) * fade
    return _mix(c0, c1, np.clip(t, 0, 1))


def room_or_outdoor(rng: np.random.Generator, K: np.ndarray, R_wc: np.ndarray,
                    cam_height: float, wall_dist: float,
                    people: Sequence[Tuple[float, float, float]],
                    height: int, width: int, outdoor: bool) -> np.ndarray:
    """Ray-cast a floor plane plus a back wall (room) or a sky (outdoor).

    Args:
        rng: Random generator.
        K: Camera intrinsics.
        R_wc: Camera-to-world rotation (world: x right, y down, z forward).
        cam_height: Camera height above the floor (metres).
        wall_dist: Distance of the back wall (room).
        people: ``(x, z, radius)`` floor positions of the people (shadows).
        height: Image height.
        width: Image width.
        outdoor: Sky instead of a wall.

    Returns:
        Planar (3, H, W) float32 RGB in [0, 1].
    """
    dx, dy, dz = _rays_world(K, R_wc, height, width)
    with np.errstate(divide='ignore', invalid='ignore'):
        t_floor = F32(cam_height) / dy
        t_floor[dy <= 1e-6] = np.inf
        if outdoor:
            on_floor = np.isfinite(t_floor)
        else:
            t_wall = F32(wall_dist) / dz
            t_wall[dz <= 1e-6] = np.inf
            on_floor = t_floor < t_wall
    tf = t_floor
    tf[~on_floor] = 0.0
    px, pz = tf * dx, tf * dz
    if outdoor:
        floor = _mix(_colour(rng, (0.2, 0.6), (0.2, 0.5)),
                     _colour(rng, (0.1, 0.5), (0.3, 0.7)),
                     np.clip(F32(0.5) + F32(0.6) * fractal_noise(
                         rng, height, width, base=12, octaves=3), 0, 1))
        if rng.random() < 0.5:  # grass
            floor *= F32(0.4)
            for c, g in enumerate((0.15, 0.27, 0.108)):
                floor[c] += F32(g)
        # sky: gradient with the elevation angle, clouds from noise
        elev = np.clip(-dy / np.sqrt(dx * dx + dy * dy + dz * dz), 0, 1)
        zen = np.array([0.25, 0.45, 0.85], F32) * rng.uniform(0.8, 1.1)
        hor = np.array([0.8, 0.87, 0.95], F32) * rng.uniform(0.85, 1.05)
        wall = _mix(hor, zen, np.sqrt(elev))
        cloud = np.clip(fractal_noise(rng, height, width, base=3,
                                      octaves=4) - F32(0.1), 0, 1)
        wall = _mix(wall, np.full(3, 0.95, F32),
                    cloud * F32(rng.uniform(0.3, 1.0)))
        # distant tree / building line near the horizon
        band = np.clip(1 - elev * F32(1 / rng.uniform(0.05, 0.2)) +
                       F32(0.5) * fractal_noise(rng, height, width, base=6,
                                                octaves=3), 0, 1)
        if rng.random() < 0.7:
            wall = _mix(wall, _colour(rng, (0.2, 0.6), (0.15, 0.45)), band)
    else:
        floor = _floor_texture(rng, px, pz, tf, (height, width))
        tw = t_wall
        tw[on_floor] = 0.0
        wx, wy = tw * dx, tw * dy
        c0 = _colour(rng, (0.02, 0.4), (0.4, 0.95))
        noise = fractal_noise(rng, height, width, base=4, octaves=3)
        n = F32(0.86) + F32(0.06) * noise
        wall = _mix(np.zeros(3, F32), c0, n)
        if rng.random() < 0.35:  # wallpaper stripes
            c1 = np.clip(c0 * rng.uniform(0.75, 0.95), 0, 1)
            wall = _mix(wall, c1, (np.sin(wx * F32(rng.uniform(6, 25))) > 0)
                        * F32(0.8))
        skirt = wy > cam_height - rng.uniform(0.05, 0.15)  # skirting board
        col = _colour(rng, (0.0, 0.2), (0.3, 0.95))
        for c in range(3):
            wall[c][skirt] = col[c]
        if rng.random() < 0.5:  # a framed picture or window
            cxw, cyw = rng.uniform(-2, 2), cam_height - rng.uniform(1.2, 1.8)
            hw, hh = rng.uniform(0.3, 0.9), rng.uniform(0.25, 0.6)
            ax, ay = np.abs(wx - F32(cxw)), np.abs(wy - F32(cyw))
            inside = (ax < hw) & (ay < hh)
            frame = inside & ((ax > hw - 0.04) | (ay > hh - 0.04))
            pic = rng.uniform(0, 1, (3, 3, 3))
            for c in range(3):
                wall[c][inside] = upsample(pic[..., c], height,
                                           width)[inside]
                wall[c][frame] = 0.15
    shade = _shadows(px, pz, people)
    for c in range(3):
        fc = floor[c]
        fc *= shade
        wall[c][on_floor] = fc[on_floor]
    return np.clip(wall, 0, 1, out=wall)


def texture(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A flat texture background: noise, stripes/checks or blurred blobs.

    Returns:
        Planar (3, H, W) float32 RGB in [0, 1].
    """
    kind = rng.integers(3)
    c0, c1 = _colour(rng), _colour(rng)
    if kind == 0:
        t = np.clip(F32(0.5) + F32(0.5) * fractal_noise(
            rng, height, width, base=rng.integers(2, 6)), 0, 1)
        img = _mix(c0, c1, t)
    elif kind == 1:
        yy = np.arange(height, dtype=F32)[:, None]
        xx = np.arange(width, dtype=F32)[None, :]
        ang = rng.uniform(0, np.pi)
        per = rng.uniform(6, 40)
        ca, sa = F32(np.cos(ang) / per), F32(np.sin(ang) / per)
        t = _parity(np.floor(xx * ca + yy * sa))
        if rng.random() < 0.5:  # checks
            t = _parity(t + np.floor(yy * ca - xx * sa))
        img = _mix(c0, c1 * 0.5 + c0 * 0.5, t)
    else:
        h, w = max(4, height // 8), max(4, width // 8)
        yy = np.arange(h, dtype=F32)[:, None]
        xx = np.arange(w, dtype=F32)[None, :]
        small = _mix(np.zeros(3, F32), c0,
                     np.broadcast_to(F32(0.6) + F32(0.4) * yy / h, (h, w)))
        for _ in range(rng.integers(4, 12)):
            cy, cx, r = rng.uniform(0, h), rng.uniform(0, w), \
                rng.uniform(0.5, 3.5)
            a = np.exp((np.square(yy - F32(cy)) + np.square(xx - F32(cx))) *
                       F32(-0.5 / (r * r)))
            small = _mix(small, _colour(rng, val=(0.3, 1.0)), a * F32(0.9))
        img = np.stack([upsample(small[c], height, width) for c in range(3)])
    img *= F32(0.85) + F32(0.15) * fractal_noise(rng, height, width, base=3,
                                                 octaves=2)
    return np.clip(img, 0, 1, out=img)
