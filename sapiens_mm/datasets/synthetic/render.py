"""Scene sampling and rendering of one synthetic sample with exact labels.

Camera convention (OpenCV, used for every output):

* camera frame: X right, Y down, Z forward (metres); the camera is at the
  origin;
* intrinsics ``K = [[f, 0, cx], [0, f, cy], [0, 0, 1]]`` with square pixels,
  ``cx = (W - 1) / 2``, ``cy = (H - 1) / 2`` and a random vertical field of
  view; a point ``(X, Y, Z)`` projects to ``x = f X / Z + cx``,
  ``y = f Y / Z + cy``;
* pixel ``(u, v)`` (column, row) has its centre at ``(x, y) = (u, v)``, so
  a keypoint at ``(x, y)`` lies in pixel ``(round(x), round(y))``;
* depth is the camera-frame ``Z`` of the surface seen through the pixel
  centre (a z-buffer, not the ray length); back-projection is
  ``X = Z * K^-1 (u, v, 1)``;
* normals are unit vectors in the camera frame pointing out of the surface,
  hence towards the camera: ``n . X < 0`` and usually ``n_z < 0``.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .background import half_res_camera, room_or_outdoor, texture
from .figure import (
    BROW_AXES,
    BROW_UV,
    EYE_AXES,
    EYE_UV,
    IRIS_R,
    MOUTH_AXES,
    MOUTH_UV,
    Figure,
    build_figure,
)
from .metadata import class_id, coco17_to_goliath, goliath_index
from .poses import rx, ry, rz
from .raycast import NEAR, raycast

SeedLike = Union[int, np.random.Generator, np.random.SeedSequence]
BACKGROUNDS = ('room', 'outdoor', 'texture')


def _rng(seed: SeedLike) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


# --------------------------------------------------------------------------
# scene


def _place_people(rng: np.random.Generator, height: int, width: int,
                  max_people: int, min_people: int = 1):
    """Camera, floor and the rigid placement of min_people..max_people
    figures."""
    p = _people_probs(max_people)[min_people - 1:]
    n = int(rng.choice(np.arange(min_people, max_people + 1),
                       p=p / p.sum()))
    figs = [build_figure(rng) for _ in range(n)]
    fov = np.deg2rad(rng.uniform(40, 65))
    f = (height / 2) / np.tan(fov / 2)
    K = np.array([[f, 0, (width - 1) / 2], [0, f, (height - 1) / 2],
                  [0, 0, 1.0]])
    hfov = 2 * np.arctan((width / 2) / f)
    main = figs[0]
    tall = main.highest_y()
    r = rng.random()
    fill = rng.uniform(0.45, 0.92) if r < 0.8 else rng.uniform(0.92, 1.8)
    dist = f * tall / (fill * height)
    cam_h = rng.uniform(0.6, 2.2)
    target = tall * (0.5 + (rng.uniform(-0.1, 0.1) if fill < 0.92 else
                            rng.uniform(0.0, 0.3)))
    pitch = np.arctan2(cam_h - target, dist) + rng.normal(0, 0.03)
    roll = rng.normal(0, 0.05)
    # world: x right, y down, z forward (horizontal); camera looks down by
    # ``pitch``; X_world = R_wc X_cam
    R_wc = rx(-pitch) @ rz(roll)
    R_cw = R_wc.T
    R0 = np.diag([1.0, -1.0, -1.0])  # body (x left, y up, z fwd) -> world
    placed: List[Figure] = []
    floor_xz: List[Tuple[float, float, float]] = []
    for i, fig in enumerate(figs):
        for _ in range(10):
            if i == 0:
                d = dist
                x = d * np.tan(rng.uniform(-0.12, 0.12) * hfov)
            else:
                d = max(dist * rng.uniform(0.8, 1.9), 1.5)
                x = d * np.tan(rng.uniform(-0.45, 0.45) * hfov)
            if all((x - px) ** 2 + (d - pz) ** 2 > 0.7 ** 2
                   for px, pz, _ in floor_xz):
                break
        yaw = rng.uniform(-np.pi, np.pi) if rng.random() < 0.6 else \
            rng.normal(0, 0.6)
        R_wb = R0 @ ry(yaw)
        t_w = np.array([x, cam_h, d])
        placed.append(fig.transformed(R_cw @ R_wb, R_cw @ t_w))
        floor_xz.append((x, d, 0.25 * tall / 1.75 + 0.1))
    return placed, K, R_wc, cam_h, floor_xz


def _people_probs(max_people: int) -> np.ndarray:
    """P(n people), n = 1..max_people: 0.5, 0.3, 0.2, then 0.1 each."""
    p = np.array(([0.5, 0.3, 0.2] + [0.1] * max(max_people - 3, 0))
                 [:max_people])
    return p / p.sum()


# --------------------------------------------------------------------------
# shading


def _scene_tables(figs: Sequence[Figure]):
    """Concatenate the primitives and materials of all figures."""
    E = [len(f.ell_center) for f in figs]
    Cn = [len(f.cone_pa) for f in figs]
    E_tot = sum(E)
    prim_person, prim_local, mats = [], [], []
    for i, f in enumerate(figs):
        prim_person += [i] * E[i]
        prim_local += list(range(E[i]))
        mats += [(i, m) for m in f.materials[:E[i]]]
    for i, f in enumerate(figs):
        prim_person += [i] * Cn[i]
        prim_local += list(range(E[i], E[i] + Cn[i]))
        mats += [(i, m) for m in f.materials[E[i]:]]
    # appearance table
    app_off = np.cumsum([0] + [len(f.appearances) for f in figs]).tolist()
    apps = [a for f in figs for a in f.appearances]
    # materials -> flat per-primitive columns (empty bands never match)
    no_band = (9.0, -9.0, 0, 0)
    base_cls, base_app, bands = [], [], ([], [])
    for i, m in mats:
        base_cls.append(m.base[0])
        base_app.append(m.base[1] + app_off[i])
        for k in range(2):
            if k < len(m.bands):
                lo, hi, c, ap = m.bands[k]
                bands[k].append((lo, hi, c, ap + app_off[i]))
            else:
                bands[k].append(no_band)
    band = [np.array(bk, np.float64).reshape(-1, 4) for bk in bands]
    is_head = np.array([m.head for _, m in mats], bool)
    cone_len = np.concatenate([np.sqrt(((f.cone_pb - f.cone_pa) ** 2).sum(1))
                               for f in figs])
    length = np.r_[np.concatenate([f.ell_radii[:, 1] for f in figs]),
                   cone_len]
    tables = dict(
        person=np.array(prim_person, int), local=np.array(prim_local, int),
        base_cls=np.array(base_cls, int), base_app=np.array(base_app, int),
        band_lo=[band[k][:, 0].astype(np.float32) for k in range(2)],
        band_hi=[band[k][:, 1].astype(np.float32) for k in range(2)],
        band_cls=[band[k][:, 2].astype(int) for k in range(2)],
        band_app=[band[k][:, 3].astype(int) for k in range(2)],
        length=length.astype(np.float32), is_head=is_head,
        axis=np.r_[np.ones(E_tot, int), np.zeros(sum(Cn), int)],
        rgbT=np.array([a.rgb for a in apps], np.float32).T.copy(),
        rgb2T=np.array([a.rgb2 for a in apps], np.float32).T.copy(),
        freq=np.array([a.freq for a in apps], np.float32),
        spec=np.array([a.spec for a in apps], np.float32))
    cat = lambda xs: np.concatenate(xs) if xs else np.zeros((0, 3))  # noqa
    geom = dict(
        ell_center=cat([f.ell_center for f in figs]),
        ell_R=np.concatenate([f.ell_R for f in figs]),
        ell_radii=cat([f.ell_radii for f in figs]),
        cone_pa=cat([f.cone_pa for f in figs]),
        cone_pb=cat([f.cone_pb for f in figs]),
        cone_ra=np.concatenate([f.cone_ra for f in figs]),
        cone_rb=np.concatenate([f.cone_rb for f in figs]))
    return tables, geom


def _face(u: np.ndarray, cls: np.ndarray, rgb: np.ndarray, figs, person):
    """Hair, eyes, brows and lips on head pixels.

    Args:
        u: (3, n) head-local unit-sphere coordinates of the head pixels.
        cls: (n,) class ids, updated in place.
        rgb: (3, n) albedo, updated in place.
        figs: The figures (their outfits give hair, eye and skin colours).
        person: (n,) figure index of every pixel.
    """
    def table(attr):
        return np.array([getattr(f.outfit, attr) for f in figs],
                        np.float32).T[:, person]

    def paint(mask, colour):
        idx = np.nonzero(mask)[0]
        for c in range(3):
            rgb[c][idx] = colour[c] if np.ndim(colour) == 1 else \
                colour[c][idx]

    hf = np.array([f.outfit.hairline_front for f in figs], np.float32)[person]
    hb = np.array([f.outfit.hairline_back for f in figs], np.float32)[person]
    hair_rgb, eye_rgb, skin = table('hair'), table('eyes'), table('skin')
    ux, uy, uz = u[0], u[1], u[2]
    front = uz > 0
    ax = np.abs(ux)
    eye = front & (((ax - EYE_UV[0]) / EYE_AXES[0]) ** 2 +
                   ((uy - EYE_UV[1]) / EYE_AXES[1]) ** 2 < 1)
    paint(eye, (0.92, 0.9, 0.88))
    r2 = (ax - EYE_UV[0]) ** 2 + (uy - EYE_UV[1]) ** 2
    iris = eye & (r2 < IRIS_R ** 2)
    paint(iris, eye_rgb)
    paint(iris & (r2 < (0.45 * IRIS_R) ** 2), (0.03, 0.03, 0.03))
    brow = front & (((ax - BROW_UV[0]) / BROW_AXES[0]) ** 2 +
                    ((uy - BROW_UV[1]) / BROW_AXES[1]) ** 2 < 1)
    paint(brow, hair_rgb * 0.8)
    lip = front & ((ux / MOUTH_AXES[0]) ** 2 +
                   ((uy - MOUTH_UV[1]) / MOUTH_AXES[1]) ** 2 < 1)
    paint(lip, skin * np.array([[0.85], [0.52], [0.52]], np.float32) +
          np.array([[0.08], [0.0], [0.0]], np.float32))
    cls[lip & (uy >= MOUTH_UV[1])] = class_id('Upper_Lip')
    cls[lip & (uy < MOUTH_UV[1])] = class_id('Lower_Lip')
    hl = hb + (hf - hb) * np.clip((uz + np.float32(0.2)) * np.float32(1 / 0.6),
                                  0, 1)
    hair = uy > hl
    cls[hair] = class_id('Hair')
    paint(hair, hair_rgb)


def _shade(rng, hits, tables, figs, K, height, width):
    """Class ids and shaded colours (float32, (3, N)) of the foreground."""
    fg, pr, tex, nrm = hits.fg, hits.fg_prim, hits.fg_tex, hits.fg_normal
    is_ell = tables['axis'][pr] == 1
    v = np.where(is_ell, tex[1], tex[0])
    cls = tables['base_cls'][pr]
    app = tables['base_app'][pr]
    for k in (1, 0):  # band 0 has priority
        m = np.nonzero((v >= tables['band_lo'][k][pr]) &
                       (v < tables['band_hi'][k][pr]))[0]
        cls[m] = tables['band_cls'][k][pr[m]]
        app[m] = tables['band_app'][k][pr[m]]
    rgb = np.take(tables['rgbT'], app, axis=1)  # (3, N)
    freq = tables['freq'][app]
    striped = np.nonzero(freq > 0)[0]
    if len(striped):
        phase = v[striped] * tables['length'][pr[striped]] * freq[striped]
        idx = striped[phase - np.floor(phase) < 0.5]
        for c in range(3):
            rgb[c][idx] = tables['rgb2T'][c][app[idx]]
    head = np.nonzero(tables['is_head'][pr])[0]
    if len(head):
        c_h, rgb_h = cls[head], rgb[:, head]
        _face(tex[:, head], c_h, rgb_h, figs, tables['person'][pr[head]])
        cls[head] = c_h
        for c in range(3):
            rgb[c][head] = rgb_h[c]
    # lighting: key light + sky/ground hemisphere + Blinn-Phong highlight
    light = _unit_np(np.array([rng.uniform(-0.8, 0.8), rng.uniform(-1, -0.1),
                               rng.uniform(-1, 0.2)]))
    l_rgb = rng.uniform(0.85, 1.15) * (1 + 0.08 * rng.standard_normal(3))
    amb = rng.uniform(0.25, 0.5)
    kd = rng.uniform(0.55, 0.85)
    ys, xs = np.divmod(fg, width)
    # view direction (towards the camera), unnormalised
    f32 = np.float32
    vx = (f32(K[0, 2]) - xs.astype(f32)) * f32(1 / K[0, 0])
    vy = (f32(K[1, 2]) - ys.astype(f32)) * f32(1 / K[1, 1])
    inv = 1 / np.sqrt(vx * vx + vy * vy + 1)
    nx, ny, nz = nrm[0], nrm[1], nrm[2]
    lx, ly, lz = (np.float32(c) for c in light)
    ndl = np.maximum(nx * lx + ny * ly + nz * lz, 0)
    hx, hy, hz = vx * inv + lx, vy * inv + ly, -inv + lz
    ndh = np.maximum(nx * hx + ny * hy + nz * hz, 0) / \
        np.sqrt(hx * hx + hy * hy + hz * hz)
    ndh2 = ndh * ndh
    ndh8 = (ndh2 * ndh2) ** 2
    spec = tables['spec'][app] * ndh8 * ndh8 * ndh8
    spec[ndl <= 0] = 0
    shade = np.float32(amb) * (np.float32(0.8) - np.float32(0.2) * ny) + \
        np.float32(kd) * ndl
    col = (rgb * shade + spec) * l_rgb.astype(np.float32)[:, None]
    return fg, cls, col, light, l_rgb


def _unit_np(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


_NOISE_SIZE = 640


@lru_cache(maxsize=1)
def _noise_table() -> np.ndarray:
    """Fixed standard-normal table the per-image sensor noise is cut from."""
    table = np.random.default_rng(20240613).standard_normal(
        (_NOISE_SIZE, _NOISE_SIZE, 3), dtype=np.float32)
    table.setflags(write=False)
    return table


def _sensor_noise(rng: np.random.Generator, height: int,
                  width: int) -> np.ndarray:
    """(H, W, 3) standard-normal sensor noise.

    A random window of a fixed noise table (drawing 150k normals per image
    would cost more than the rest of the post-processing); images larger
    than the table draw fresh noise.
    """
    if height > _NOISE_SIZE or width > _NOISE_SIZE:
        return rng.standard_normal((height, width, 3), dtype=np.float32)
    y0 = int(rng.integers(_NOISE_SIZE - height + 1))
    x0 = int(rng.integers(_NOISE_SIZE - width + 1))
    return _noise_table()[y0:y0 + height, x0:x0 + width]


def _upsample2(img: np.ndarray, height: int, width: int) -> np.ndarray:
    """Bilinear 2x upsampling of an int16 (h, w, 3) image to (H, W, 3).

    Pixel-centre aligned (low-resolution pixel ``j`` covers pixels ``2j``
    and ``2j + 1``, weights 3/4 and 1/4, edges clamped) in integer
    arithmetic; within one grey level of PIL's bilinear resize.
    """
    def twice(x, axis):
        lo = np.concatenate([np.take(x, [0], axis), x], axis)
        hi = np.concatenate([x, np.take(x, [-1], axis)], axis)
        n = x.shape[axis]
        x3 = x * 3 + 2
        shape = list(x.shape)
        shape[axis] = 2 * n
        out = np.empty(shape, x.dtype)
        even = [slice(None)] * x.ndim
        odd = [slice(None)] * x.ndim
        even[axis], odd[axis] = slice(0, None, 2), slice(1, None, 2)
        prev = [slice(None)] * x.ndim
        nxt = [slice(None)] * x.ndim
        prev[axis], nxt[axis] = slice(0, n), slice(1, n + 1)
        out[tuple(even)] = (x3 + lo[tuple(prev)]) >> 2
        out[tuple(odd)] = (x3 + hi[tuple(nxt)]) >> 2
        return out

    return twice(twice(img, 0)[:height], 1)[:, :width]


def _blur121(img: np.ndarray, w: float) -> np.ndarray:
    """Separable ``[w, 1 - 2w, w]`` blur of an int16 image (edges clamped).

    6-bit fixed point, so values up to 511 cannot overflow int16.
    """
    b = int(round(64 * w))
    a = 64 - 2 * b
    y = img * a
    y[1:] += b * img[:-1]
    y[0] += b * img[0]
    y[:-1] += b * img[1:]
    y[-1] += b * img[-1]
    y += 32
    y >>= 6
    z = y * a
    z[:, 1:] += b * y[:, :-1]
    z[:, 0] += b * y[:, 0]
    z[:, :-1] += b * y[:, 1:]
    z[:, -1] += b * y[:, -1]
    z += 32
    z >>= 6
    return z


def _quantise(x: np.ndarray) -> np.ndarray:
    """Float colours in [0, 1] to uint8."""
    return (np.clip(x, 0, 1) * 255 + 0.5).astype(np.uint8)


# --------------------------------------------------------------------------
# keypoints


def _keypoints(fig: Figure, person: int, hits, tables, K, height, width):
    """Goliath-308 ``(x, y, v)`` of one figure (v: 0/1/2, see module doc)."""
    out = np.zeros((308, 3))
    X = fig.kp_pos
    z = X[:, 2]
    ok_z = z > NEAR
    zs = np.where(ok_z, z, 1.0)
    x = np.round(K[0, 0] * X[:, 0] / zs + K[0, 2], 2)
    y = np.round(K[1, 1] * X[:, 1] / zs + K[1, 2], 2)
    iu = np.floor(x + 0.5).astype(int)
    iv = np.floor(y + 0.5).astype(int)
    inside = ok_z & (iu >= 0) & (iu < width) & (iv >= 0) & (iv < height)
    iu_c, iv_c = np.clip(iu, 0, width - 1), np.clip(iv, 0, height - 1)
    front = hits.prim[iv_c, iu_c]
    zbuf = hits.depth[iv_c, iu_c]
    fr = np.maximum(front, 0)
    mine = (front >= 0) & (tables['person'][fr] == person)
    local = np.where(mine, tables['local'][fr], 0)
    owned = mine & fig.kp_owner[np.arange(len(z)), local]
    # surface keypoints facing away from the camera are self-occluded
    facing = (fig.kp_normal * X).sum(1) < 0
    interior = ~fig.kp_normal.any(1)
    visible = inside & owned & (zbuf >= z - fig.kp_tol) & (facing | interior)
    vis = np.where(visible, 2, np.where(inside, 1, 0))
    idx = np.array([goliath_index()[n] for n in fig.kp_names])
    out[idx, 0] = np.where(inside, x, 0)
    out[idx, 1] = np.where(inside, y, 0)
    out[idx, 2] = vis
    return out


# --------------------------------------------------------------------------
# public API


def render_sample(rng_or_seed: SeedLike, size: Tuple[int, int] = (256, 192),
                  max_people: int = 3,
                  background: Optional[str] = None,
                  min_people: int = 1,
                  soft_edges: bool = False) -> Dict[str, object]:
    """Render one synthetic image of ``min_people``..``max_people`` people
    with labels.

    Args:
        rng_or_seed: Seed (int / SeedSequence) or a numpy Generator; the
            same seed always gives the same sample.
        size: ``(height, width)`` in pixels.
        max_people: Maximum number of people (at least 1).
        min_people: Minimum number of people placed (1 to ``max_people``;
            the default 1 keeps the samples of every seed as they were).
            A placed person can still be fully occluded or out of frame:
            ``people`` lists the visible ones.
        background: ``'room'``, ``'outdoor'`` or ``'texture'``; random when
            None.
        soft_edges: Composite the people with a soft alpha (the hard
            coverage blurred by a separable [1 2 1]/4 kernel: a 2-pixel
            anti-aliased edge) instead of a hard one, and return that alpha
            with the foreground and background it was composited from
            (matting ground truth). The image then gets no optical blur
            (it would no longer be ``alpha F + (1 - alpha) B``), only
            sensor noise; the random draws are those of the hard sample.

    Returns:
        A dict with

        * ``image``: (H, W, 3) uint8 RGB;
        * ``mask``: (H, W) uint8 ``goliath_28`` class ids, 0 = background;
        * ``depth``: (H, W) float32 camera-frame z, 0 on background;
        * ``normal``: (H, W, 3) float32 unit camera-frame normals, 0 on
          background;
        * ``instance``: (H, W) int16 index into ``people`` of the visible
          person, -1 on background;
        * ``K``: (3, 3) float64 intrinsics;
        * ``people``: one dict per person with at least one visible pixel:
          ``keypoints`` (308, 3) float64 ``(x, y, v)`` in Goliath order,
          ``keypoints_coco`` (17, 3), ``bbox`` ``[x, y, w, h]`` of the
          visible pixels (pixel ``i`` spans ``[i, i + 1)``), ``area`` (visible
          pixel count), ``num_keypoints`` and ``num_keypoints_coco``
          (labelled counts, v > 0);
        * with ``soft_edges``: ``alpha`` (H, W) float32 in [0, 1],
          ``foreground`` and ``background`` (H, W, 3) uint8 RGB, with
          ``image`` = ``alpha * foreground + (1 - alpha) * background``
          rounded, plus sensor noise.
    """
    if background not in (None,) + BACKGROUNDS:
        raise ValueError(f'background must be one of {BACKGROUNDS} or None, '
                         f'got {background!r}')
    rng = _rng(rng_or_seed)
    height, width = int(size[0]), int(size[1])
    max_people = max(1, int(max_people))
    if not 1 <= int(min_people) <= max_people:
        raise ValueError(f'min_people must be between 1 and max_people '
                         f'({max_people}), got {min_people}.')
    figs, K, R_wc, cam_h, floor_xz = _place_people(rng, height, width,
                                                   max_people,
                                                   int(min_people))
    tables, geom = _scene_tables(figs)
    hits = raycast(**geom, K=K, height=height, width=width)
    fg, cls, col, light, l_rgb = _shade(rng, hits, tables, figs, K, height,
                                        width)
    # background (planar, float32), rendered at half resolution: it is out
    # of focus anyway
    kind = background or rng.choice(BACKGROUNDS, p=[0.45, 0.3, 0.25])
    h2, w2 = (height + 1) // 2, (width + 1) // 2
    if kind == 'texture':
        bg = texture(rng, h2, w2)
    else:
        wall = max(p[1] for p in floor_xz) + rng.uniform(1.0, 6.0)
        bg = room_or_outdoor(rng, half_res_camera(K), R_wc, cam_h, wall,
                             floor_xz, h2, w2, outdoor=(kind == 'outdoor'))
    # compositing in int16: display gamma (LUT), bilinear 2x upsampling of
    # the background, the people, optional optical blur, sensor noise
    gain = (0.55 + 0.4 * rng.random()) * l_rgb
    gamma = rng.uniform(0.85, 1.15)
    lut = (np.linspace(0, 1, 256) ** gamma * 255 + 0.5).astype(np.int16)
    small = np.stack([lut[_quantise(bg[c] * np.float32(gain[c])).astype(
        np.intp)] for c in range(3)], -1)
    img = _upsample2(small, height, width)
    matte = None
    if soft_edges:
        back = img.copy()
    flat = img.reshape(-1, 3)
    for c in range(3):
        flat[:, c][fg] = lut[_quantise(col[c]).astype(np.intp)]
    if soft_edges:
        matte = _soft_composite(img, back, fg, height, width)
        img = matte[3]
    blur = rng.random() < 0.6
    blur_w = rng.uniform(0.1, 0.25) if blur else 0.0
    if blur and not soft_edges:  # optical blur, sigma ~0.4-0.7 px
        img = _blur121(img, blur_w)
    img += (_sensor_noise(rng, height, width) *
            np.float32(rng.uniform(0, 6))).astype(np.int16)
    image = np.clip(img, 0, 255, out=img).astype(np.uint8)

    mask = np.zeros(height * width, np.uint8)
    mask[fg] = cls
    mask = mask.reshape(height, width)
    # people: visible pixels per figure, computed on the foreground only
    person_fg = tables['person'][hits.fg_prim]
    ys, xs = np.divmod(fg, width)
    area = np.bincount(person_fg, minlength=len(figs))
    people = []
    remap = np.full(len(figs), -1, np.int16)
    coco_idx = np.array(coco17_to_goliath())
    for i, fig in enumerate(figs):
        if area[i] == 0:
            continue  # fully occluded or out of frame
        sel = person_fg == i
        x_i, y_i = xs[sel], ys[sel]
        x0, y0 = int(x_i.min()), int(y_i.min())
        kps = _keypoints(fig, i, hits, tables, K, height, width)
        coco = kps[coco_idx]
        remap[i] = len(people)
        people.append(dict(
            keypoints=kps, keypoints_coco=coco,
            bbox=[x0, y0, int(x_i.max()) - x0 + 1, int(y_i.max()) - y0 + 1],
            area=int(area[i]), num_keypoints=int((kps[:, 2] > 0).sum()),
            num_keypoints_coco=int((coco[:, 2] > 0).sum())))
    instance = np.full(height * width, -1, np.int16)
    instance[fg] = remap[person_fg]
    instance = instance.reshape(height, width)
    out = dict(image=image, mask=mask, depth=hits.depth, normal=hits.normal,
               instance=instance, K=K, people=people)
    if matte is not None:
        out.update(alpha=matte[0], foreground=matte[1], background=matte[2])
    return out


def _soft_composite(people: np.ndarray, back: np.ndarray, fg: np.ndarray,
                    height: int, width: int):
    """Composite the people over the background with a soft alpha.

    Args:
        people: (H, W, 3) int16 image with the people's colours on their
            pixels (flat indices ``fg``).
        back: (H, W, 3) int16 background alone.
        fg: Flat indices of the people's pixels.

    Returns:
        ``(alpha, foreground, background, composite)``: alpha (H, W)
        float32, the hard coverage blurred by [1 2 1]/4 in x and y;
        foreground (H, W, 3) uint8, the people's colours extended by two
        pixels outside them (nearest person pixel) so it is defined wherever
        alpha > 0; background (H, W, 3) uint8; the composite, int16.
    """
    hard = np.zeros(height * width, np.float32)
    hard[fg] = 1.0
    hard = hard.reshape(height, width)
    k = np.array([0.25, 0.5, 0.25], np.float32)
    pad = np.pad(hard, 1, mode='edge')
    rows = k[0] * pad[:, :-2] + k[1] * pad[:, 1:-1] + k[2] * pad[:, 2:]
    alpha = k[0] * rows[:-2] + k[1] * rows[1:-1] + k[2] * rows[2:]
    colour = people.astype(np.float32)
    known = hard > 0
    for _ in range(2):  # grow the colours into the soft edge
        grown, count = np.zeros_like(colour), np.zeros_like(hard)
        for dy, dx in ((-1, 0), (1, 0), (0, -1), (0, 1)):
            shifted = np.roll(known, (dy, dx), axis=(0, 1))
            valid = shifted & ~known
            grown[valid] += np.roll(colour, (dy, dx), axis=(0, 1))[valid]
            count[valid] += 1
        new = count > 0
        colour[new] = grown[new] / count[new][:, None]
        known = known | new
    foreground = np.clip(np.rint(colour), 0, 255).astype(np.uint8)
    foreground[~known] = 0
    background = np.clip(back, 0, 255).astype(np.uint8)
    comp = alpha[..., None] * foreground + (1.0 - alpha[..., None]) * \
        background
    return (alpha, foreground, background,
            np.rint(comp).astype(np.int16))
