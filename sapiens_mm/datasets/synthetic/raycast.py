"""Vectorised ray casting of ellipsoids and round cones with a z-buffer.

All primitives of a scene are cast in one batch: every primitive contributes
the pixels of its projected bounding box, the ray/primitive intersections of
all those (primitive, pixel) pairs are solved at once with numpy, and the
nearest hit of every pixel is kept with a scatter-min (``np.minimum.at``).

Camera convention (OpenCV): camera at the origin, X right, Y down, Z forward.
Pixel ``(u, v)`` (column, row) has its centre at the continuous image
coordinate ``(u, v)``; the ray through it is ``d = ((u - cx) / fx,
(v - cy) / fy, 1)`` so a hit at ``t * d`` has camera-frame depth ``z = t``.

Primitives:

* ellipsoid: centre ``c``, rotation ``R`` (columns = local axes, in camera
  frame) and radii ``r``; local unit-sphere coordinates of a surface point
  ``X`` are ``u = diag(1/r) R^T (X - c)``.
* round cone: the convex hull of two spheres ``(pa, ra)`` and ``(pb, rb)``
  (a capsule when ``ra == rb``); the intersection follows Inigo Quilez'
  closed form.  Its texture coordinate is the axial parameter ``s`` in [0, 1]
  of the surface point projected on the segment ``pa -> pb``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NEAR = 0.05  #: primitives with any part closer than this (metres) are skipped


@dataclass
class RayHits:
    """Per-pixel result of :func:`raycast`.

    Attributes:
        prim: (H, W) int32, index of the visible primitive (ellipsoids first,
            then round cones), -1 on background.
        depth: (H, W) float32 camera-frame z of the visible surface, 0 on
            background.
        normal: (H, W, 3) float32 unit camera-frame normal (facing the
            camera, so ``n . d < 0``), 0 on background.
        fg: (N,) flat indices of the foreground pixels (not sorted).
        fg_prim: (N,) primitive of each foreground pixel.
        fg_normal: (3, N) float32 normals of the foreground pixels
            (component-major).
        fg_tex: (3, N) float32 texture coordinates: local unit-sphere
            coordinates for ellipsoids, ``(s, 0, 0)`` for round cones.
    """

    prim: np.ndarray
    depth: np.ndarray
    normal: np.ndarray
    fg: np.ndarray
    fg_prim: np.ndarray
    fg_normal: np.ndarray
    fg_tex: np.ndarray


def _project_box(lo: np.ndarray, hi: np.ndarray, fx: float, fy: float,
                 cx: float, cy: float):
    """Conservative image bounds of axis-aligned 3D boxes (z > 0)."""
    zs = (lo[:, 2:3], hi[:, 2:3])
    xs = np.concatenate([lo[:, 0:1] / z for z in zs] +
                        [hi[:, 0:1] / z for z in zs], axis=1)
    ys = np.concatenate([lo[:, 1:2] / z for z in zs] +
                        [hi[:, 1:2] / z for z in zs], axis=1)
    return (cx + fx * xs.min(1), cx + fx * xs.max(1),
            cy + fy * ys.min(1), cy + fy * ys.max(1))


def _pixel_ranges(u0, u1, v0, v1, valid, width, height):
    """Inclusive-exclusive pixel ranges of pixel centres inside bounds."""
    x0 = np.clip(np.ceil(u0), 0, width).astype(np.int64)
    x1 = np.clip(np.floor(u1) + 1, 0, width).astype(np.int64)
    y0 = np.clip(np.ceil(v0), 0, height).astype(np.int64)
    y1 = np.clip(np.floor(v1) + 1, 0, height).astype(np.int64)
    w = np.where(valid, np.maximum(x1 - x0, 0), 0)
    h = np.where(valid, np.maximum(y1 - y0, 0), 0)
    return x0, y0, w, h


def _row_spans(x0, y0, w, h, lo_fn):
    """Per-row pixel spans of every primitive's footprint.

    Args:
        x0, y0, w, h: Pixel bounding boxes of the primitives.
        lo_fn: ``lo_fn(prim, v) -> (lo, hi)``, conservative continuous x
            bounds of the primitive's projection on image row ``v``
            (``lo > hi`` when empty).

    Returns:
        ``(prim, v, xa, n)`` per span: primitive, row, first column and
        pixel count (spans are sorted by primitive).
    """
    prim = np.repeat(np.arange(len(h)), h)
    start = np.cumsum(h) - h
    v = y0[prim] + (np.arange(len(prim)) - start[prim])
    lo, hi = lo_fn(prim, v.astype(np.float64))
    with np.errstate(invalid='ignore'):
        xa = np.maximum(np.ceil(lo - 1e-6), x0[prim])
        xb = np.minimum(np.floor(hi + 1e-6), x0[prim] + w[prim] - 1)
    ok = np.isfinite(xa) & np.isfinite(xb) & (xb >= xa)
    xa = np.where(ok, xa, 0).astype(np.int64)
    n = np.where(ok, xb - xa + 1, 0).astype(np.int64)
    return prim, v, xa, n


def _ellipse_rows(center, M, K):
    """Exact x bounds of the ellipsoids' silhouettes on image rows."""
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    op = -np.einsum('nij,nj->ni', M, center)  # o' = M (0 - c)
    C = (op * op).sum(1) - 1.0

    def fn(prim, v):
        b = (v - cy) / fy
        Mg, o = np.take(M, prim, axis=0), np.take(op, prim, axis=0)
        alpha = Mg[:, :, 0]                      # d' = alpha a + beta
        beta = Mg[:, :, 1] * b[:, None] + Mg[:, :, 2]
        oa, ob = (o * alpha).sum(1), (o * beta).sum(1)
        Cg = C[prim]
        qa = oa * oa - Cg * (alpha * alpha).sum(1)
        qb = oa * ob - Cg * (alpha * beta).sum(1)
        qc = ob * ob - Cg * (beta * beta).sum(1)
        disc = qb * qb - qa * qc
        ok = (qa < 0) & (disc >= 0)
        sq = np.sqrt(np.where(ok, disc, 0.0))
        qa_s = np.where(ok, qa, -1.0)
        a1, a2 = (-qb + sq) / qa_s, (-qb - sq) / qa_s  # qa < 0: a1 <= a2
        lo = np.where(ok, cx + fx * a1, np.inf)
        hi = np.where(ok, cx + fx * a2, -np.inf)
        bad = (qa >= 0) & (Cg > 0)  # unbounded silhouette: keep whole box
        lo[bad], hi[bad] = -np.inf, np.inf
        return lo, hi
    return fn


def _stadium_rows(pa, pb, ra, rb, K):
    """Conservative x bounds of round cones: 2D stadium around the segment.

    A sphere (C, r) is seen under the half angle ``alpha = asin(r / |C|)``
    around the direction of C, at the angle ``theta`` from the optical axis;
    its image lies within ``f sin(alpha) / (cos(theta) cos(theta + alpha))``
    (the radial extent, larger than the tangential one) of the projection of
    C.  A round cone (hull of two spheres) projects inside the hull of its
    two end discs, which lies inside the stadium with the larger radius.
    """
    f, cx, cy = max(K[0, 0], K[1, 1]), K[0, 2], K[1, 2]

    def proj(c, r):
        z = np.maximum(c[:, 2], 1e-6)
        dist = np.sqrt((c * c).sum(1))
        alpha = np.arcsin(np.clip(r / dist, 0, 1))
        theta = np.arccos(np.clip(z / dist, -1, 1))
        den = np.cos(theta) * np.cos(np.minimum(theta + alpha, 1.5))
        rad = f * np.sin(alpha) / den * (1 + 1e-6) + 1e-6
        return cx + f * c[:, 0] / z, cy + f * c[:, 1] / z, rad

    ua, va, Ra = proj(pa, ra)
    ub, vb, Rb = proj(pb, rb)
    R = np.maximum(Ra, Rb)
    ex, ey = ub - ua, vb - va
    L = np.hypot(ex, ey)
    Ls = np.maximum(L, 1e-9)
    ex, ey = ex / Ls, ey / Ls

    def disc_iv(u0, v0, Rg, v):
        hh = Rg * Rg - (v - v0) ** 2
        s = np.sqrt(np.maximum(hh, 0))
        return np.where(hh >= 0, u0 - s, np.inf), \
            np.where(hh >= 0, u0 + s, -np.inf)

    def slab(c0, c1, coef, off):
        # x - ua with c0 <= coef * (x - ua) + off <= c1
        safe = np.abs(coef) > 1e-9
        cs = np.where(safe, coef, 1.0)
        x1, x2 = (c0 - off) / cs, (c1 - off) / cs
        lo, hi = np.minimum(x1, x2), np.maximum(x1, x2)
        inside = (off >= c0) & (off <= c1)
        lo = np.where(safe, lo, np.where(inside, -np.inf, np.inf))
        hi = np.where(safe, hi, np.where(inside, np.inf, -np.inf))
        return lo, hi

    def fn(prim, v):
        Rg = R[prim]
        l1, h1 = disc_iv(ua[prim], va[prim], Rg, v)
        l2, h2 = disc_iv(ub[prim], vb[prim], Rg, v)
        dv = v - va[prim]
        exg, eyg = ex[prim], ey[prim]
        sl, sh = slab(0.0, L[prim], exg, dv * eyg)     # along the axis
        wl, wh = slab(-Rg, Rg, -eyg, dv * exg)         # across the axis
        bl = np.maximum(sl, wl) + ua[prim]
        bh = np.minimum(sh, wh) + ua[prim]
        band = (bl <= bh) & (L[prim] > 1e-6)
        lo = np.minimum(np.minimum(l1, l2), np.where(band, bl, np.inf))
        hi = np.maximum(np.maximum(h1, h2), np.where(band, bh, -np.inf))
        return lo, hi
    return fn


def _ellipsoid_t(sp_prim, sp_b, sp_n, a, center, M):
    """Hit depth of every (ellipsoid, pixel) element (inf on a miss).

    With ``d = (a, b, 1)`` and ``Q = M^T M`` the hit solves
    ``A t^2 + 2 B t + C = 0``, ``A = d^T Q d``, ``B = -c^T Q d``,
    ``C = c^T Q c - 1``; per image row ``A`` and ``B`` are polynomials in
    ``a`` whose coefficients are expanded per span with ``np.repeat``.
    """
    Q = np.einsum('nki,nkj->nij', M, M)
    g = -np.einsum('nij,nj->ni', Q, center)       # B = g . d
    C = np.einsum('ni,ni->n', center, -g) - 1.0
    P, b = sp_prim, sp_b
    al2 = Q[P, 0, 0]
    al1 = 2.0 * (Q[P, 0, 1] * b + Q[P, 0, 2])
    al0 = (Q[P, 1, 1] * b + 2.0 * Q[P, 1, 2]) * b + Q[P, 2, 2]
    be1 = g[P, 0]
    be0 = g[P, 1] * b + g[P, 2]
    rep = lambda x: np.repeat(x, sp_n)  # noqa: E731
    A = (rep(al2) * a + rep(al1)) * a + rep(al0)
    B = rep(be1) * a + rep(be0)
    disc = B * B - A * rep(C[P])
    t = (-B - np.sqrt(np.maximum(disc, 0.0))) / A
    t[(disc <= 0) | (t <= NEAR)] = np.inf
    return t


def _ellipsoid_attrs(prim, a, b, t, center, M):
    """Normals and local unit-sphere coordinates of ellipsoid hits.

    With ``X = t (a, b, 1)``: ``u = M (X - c)`` and the (unnormalised)
    normal is the gradient direction ``M^T u = Q X - Q c``, ``Q = M^T M``.
    Returns component-major (3, n) arrays.
    """
    Q = np.einsum('nki,nkj->nij', M, M)
    table = np.concatenate([M.reshape(-1, 9),
                            np.einsum('nij,nj->ni', M, center),
                            Q.reshape(-1, 9),
                            np.einsum('nij,nj->ni', Q, center)], 1)
    g = np.take(table, prim, axis=0).T  # (24, n) view: one fast row gather
    u = np.empty((3, len(t)))
    n = np.empty((3, len(t)))
    for i in range(3):
        u[i] = t * (g[3 * i] * a + g[3 * i + 1] * b + g[3 * i + 2]) - g[9 + i]
        n[i] = t * (g[12 + 3 * i] * a + g[13 + 3 * i] * b +
                    g[14 + 3 * i]) - g[21 + i]
    return n, u


def _cone_t(sp_prim, sp_b, sp_n, a, pa, pb, ra, rb):
    """Hit depth and case (0 body, 1 cap a, 2 cap b) of round-cone elements.

    Follows Inigo Quilez' round-cone intersection with the unit ray
    ``rd = d / |d|``; dot products of ``rd`` with per-primitive vectors are
    linear in ``a`` on an image row, so their coefficients are per span.
    """
    ba = pb - pa
    m0 = (ba * ba).sum(1)
    m1 = -(ba * pa).sum(1)
    m5 = (pa * pa).sum(1)
    m7 = (pb * pb).sum(1)
    rr = ra - rb
    d2 = m0 - rr * rr
    k0 = d2 * m5 - m1 * m1 + 2.0 * m1 * rr * ra - m0 * ra * ra
    P, b = sp_prim, sp_b
    rep = lambda x: np.repeat(x, sp_n)  # noqa: E731
    inv = 1.0 / np.sqrt(a * a + rep(b * b + 1.0))
    # m2 = ba.rd, m3 = -pa.rd, m6 = -pb.rd
    m2 = (rep(ba[P, 0]) * a + rep(ba[P, 1] * b + ba[P, 2])) * inv
    m3 = -(rep(pa[P, 0]) * a + rep(pa[P, 1] * b + pa[P, 2])) * inv
    m6 = -(rep(pb[P, 0]) * a + rep(pb[P, 1] * b + pb[P, 2])) * inv
    d2g = rep(d2[P])
    k2 = d2g - m2 * m2
    k1 = d2g * m3 + m2 * rep(rr[P] * ra[P] - m1[P])
    h = k1 * k1 - rep(k0[P]) * k2
    ok = h >= 0
    with np.errstate(divide='ignore', invalid='ignore'):
        tb = (-np.sqrt(np.maximum(h, 0.0)) - k1) / k2
    y = rep(m1[P] - ra[P] * rr[P]) + tb * m2
    body = ok & (k2 > 0) & (y > 0) & (y < d2g)
    # end caps (spheres), for the rays that miss the body
    h1 = m3 * m3 - rep(m5[P] - ra[P] ** 2)
    h2 = m6 * m6 - rep(m7[P] - rb[P] ** 2)
    t1 = -m3 - np.sqrt(np.maximum(h1, 0.0))
    t2 = -m6 - np.sqrt(np.maximum(h2, 0.0))
    t1[h1 <= 0] = np.inf
    t2[h2 <= 0] = np.inf
    first = t1 <= t2
    t = np.where(body, tb, np.where(first, t1, t2))
    t[~ok] = np.inf
    case = np.where(body, 0, np.where(first, 1, 2)).astype(np.int8)
    z = t * inv
    z[z <= NEAR] = np.inf
    return z, case


def _cone_attrs(prim, a, b, z, case, pa, pb, ra, rb):
    """Normals and axial coordinate ``s`` of round-cone hits.

    Returns component-major (3, n) arrays (texture: ``(s, 0, 0)``).
    """
    g = np.take(np.concatenate([pa, pb - pa, (ra - rb)[:, None],
                                ra[:, None], pb], 1), prim, axis=0).T
    X = (z * a, z * b, z)
    oa = [X[i] - g[i] for i in range(3)]
    ba = [g[3 + i] for i in range(3)]
    m0 = ba[0] * ba[0] + ba[1] * ba[1] + ba[2] * ba[2]
    rrg = g[6]
    d2 = m0 - rrg * rrg
    proj = oa[0] * ba[0] + oa[1] * ba[1] + oa[2] * ba[2]
    # body: n ~ d2 (X - pa) - ba y, with y = (X - pa).ba - ra rr
    y = proj - g[7] * rrg
    n = np.empty((3, len(z)))
    c1, c2 = np.nonzero(case == 1)[0], np.nonzero(case == 2)[0]
    for i in range(3):
        ni = n[i]
        np.multiply(d2, oa[i], out=ni)
        ni -= ba[i] * y
        ni[c1] = oa[i][c1]
        ni[c2] = X[i][c2] - g[8 + i][c2]
    tex = np.zeros((3, len(z)))
    np.clip(proj / m0, 0.0, 1.0, out=tex[0])
    return n, tex


#: target number of (primitive, pixel) elements per chunk: float64
#: temporaries of 16000 elements stay under glibc's 128 KiB mmap threshold
CHUNK = 16000


def _chunks(n: np.ndarray):
    """Split consecutive spans into groups of about :data:`CHUNK` pixels."""
    if len(n) == 0:
        return []
    cum = np.cumsum(n)
    cut = np.nonzero(np.diff(cum // CHUNK))[0] + 1
    bounds = np.r_[0, cut, len(n)]
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])
            if b > a]


def raycast(ell_center: np.ndarray, ell_R: np.ndarray, ell_radii: np.ndarray,
            cone_pa: np.ndarray, cone_pb: np.ndarray, cone_ra: np.ndarray,
            cone_rb: np.ndarray, K: np.ndarray, height: int,
            width: int) -> RayHits:
    """Render the z-buffer of a set of ellipsoids and round cones.

    Args:
        ell_center: (E, 3) ellipsoid centres, camera frame (metres).
        ell_R: (E, 3, 3) ellipsoid rotations (columns = local axes).
        ell_radii: (E, 3) ellipsoid radii along the local axes.
        cone_pa: (C, 3) first sphere centres of the round cones.
        cone_pb: (C, 3) second sphere centres.
        cone_ra: (C,) first sphere radii.
        cone_rb: (C,) second sphere radii (``|pb - pa| > |ra - rb|``).
        K: (3, 3) pinhole intrinsics.
        height: Image height in pixels.
        width: Image width in pixels.

    Returns:
        The per-pixel :class:`RayHits`; primitive ids are ``0..E-1`` for
        ellipsoids and ``E..E+C-1`` for round cones.
    """
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    E = len(ell_center)
    ell_R = ell_R.reshape(E, 3, 3)
    # --- screen-space boxes, then per-row spans ---------------------------
    ext = np.sqrt(((ell_R * ell_radii[:, None, :]) ** 2).sum(2))
    rad_a, rad_b = cone_ra[:, None], cone_rb[:, None]
    lo = np.concatenate([ell_center - ext,
                         np.minimum(cone_pa - rad_a, cone_pb - rad_b)])
    hi = np.concatenate([ell_center + ext,
                         np.maximum(cone_pa + rad_a, cone_pb + rad_b)])
    valid = lo[:, 2] > NEAR
    lo_s = np.where(valid[:, None], lo, 1.0)
    hi_s = np.where(valid[:, None], hi, 1.0)
    x0, y0, w, h = _pixel_ranges(*_project_box(lo_s, hi_s, fx, fy, cx, cy),
                                 valid, width, height)
    M = np.transpose(ell_R, (0, 2, 1)) / ell_radii[:, :, None]
    sp_e = _row_spans(x0[:E], y0[:E], w[:E], h[:E],
                      _ellipse_rows(ell_center, M, K))
    sp_c = _row_spans(x0[E:], y0[E:], w[E:], h[E:],
                      _stadium_rows(cone_pa, cone_pb, cone_ra, cone_rb, K))
    prim_s = np.concatenate([sp_e[0], sp_c[0] + E])
    v_s = np.concatenate([sp_e[1], sp_c[1]])
    xa_s = np.concatenate([sp_e[2], sp_c[2]])
    n_s = np.concatenate([sp_e[3], sp_c[3]])
    total = int(n_s.sum())
    start = np.cumsum(n_s) - n_s
    px = np.arange(total) - np.repeat(start - xa_s, n_s)
    a = (px.astype(np.float64) - cx) * (1.0 / fx)
    b_s = (v_s - cy) / fy
    # --- intersections, in chunks of whole spans ------------------------
    # (chunks keep numpy temporaries small: large ones are mmap'ed and page
    # faulted on every allocation, which costs more than the arithmetic)
    t = np.empty(total)
    case = np.zeros(total, np.int8)
    ne = len(sp_e[0])
    for s0, s1 in _chunks(n_s[:ne]):
        e0, e1 = start[s0], start[s1 - 1] + n_s[s1 - 1]
        t[e0:e1] = _ellipsoid_t(sp_e[0][s0:s1], b_s[s0:s1], n_s[s0:s1],
                                a[e0:e1], ell_center, M)
    for s0, s1 in _chunks(n_s[ne:]):
        s0, s1 = s0 + ne, s1 + ne
        e0, e1 = start[s0], start[s1 - 1] + n_s[s1 - 1]
        t[e0:e1], case[e0:e1] = _cone_t(
            sp_c[0][s0 - ne:s1 - ne], b_s[s0:s1], n_s[s0:s1], a[e0:e1],
            cone_pa, cone_pb, cone_ra, cone_rb)
    idx = np.nonzero(t < np.inf)[0]
    span_of = np.repeat(np.arange(len(n_s)), n_s)
    pix = v_s[span_of[idx]] * width + px[idx]
    th = t[idx]
    # --- z-buffer ---------------------------------------------------------
    zbuf = np.full(height * width, np.inf)
    np.minimum.at(zbuf, pix, th)
    win = th == zbuf[pix]
    elem_buf = np.full(height * width, -1, np.int64)
    elem_buf[pix[win]] = idx[win]  # exact ties: last write wins
    fg = np.nonzero(elem_buf >= 0)[0]
    sel = elem_buf[fg]
    prim_sel = prim_s[span_of[sel]]
    # --- attributes of the visible surfaces only --------------------------
    # foreground arrays are ordered ellipsoid pixels first, then cone pixels
    is_e = prim_sel < E
    se, sc = np.nonzero(is_e)[0], np.nonzero(~is_e)[0]
    fg = np.concatenate([fg[se], fg[sc]])
    sel = np.concatenate([sel[se], sel[sc]])
    prim_sel = np.concatenate([prim_sel[se], prim_sel[sc]])
    ne_ = len(se)
    e, c = sel[:ne_], sel[ne_:]
    b_sel = b_s[span_of[sel]]
    parts_n, parts_t = [], []
    if len(e):
        n_e, u_e = _ellipsoid_attrs(prim_sel[:ne_], a[e], b_sel[:ne_], t[e],
                                    ell_center, M)
        parts_n.append(n_e)
        parts_t.append(u_e)
    if len(c):
        n_c, s_c = _cone_attrs(prim_sel[ne_:] - E, a[c], b_sel[ne_:], t[c],
                               case[c], cone_pa, cone_pb, cone_ra, cone_rb)
        parts_n.append(n_c)
        parts_t.append(s_c)
    nrm = np.concatenate(parts_n, 1) if parts_n else np.zeros((3, 0))
    tex = np.concatenate(parts_t, 1) if parts_t else np.zeros((3, 0))
    nrm *= 1 / np.sqrt(nrm[0] * nrm[0] + nrm[1] * nrm[1] + nrm[2] * nrm[2])
    nrm = nrm.astype(np.float32)
    prim_buf = np.full(height * width, -1, np.int32)
    prim_buf[fg] = prim_sel
    depth = np.zeros(height * width, np.float32)
    depth[fg] = t[sel]
    normal = np.zeros((height * width, 3), np.float32)
    for i in range(3):
        normal[:, i][fg] = nrm[i]
    return RayHits(prim=prim_buf.reshape(height, width),
                   depth=depth.reshape(height, width),
                   normal=normal.reshape(height, width, 3),
                   fg=fg, fg_prim=prim_sel, fg_normal=nrm,
                   fg_tex=tex.astype(np.float32))
