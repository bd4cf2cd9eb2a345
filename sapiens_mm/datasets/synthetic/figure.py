"""Articulated human figure made of ellipsoids and round cones.

A figure is built in its *body frame* (metres; x = the person's left, y = up,
z = the direction the person faces; the floor is ``y = 0``) by forward
kinematics over a joint tree whose angles are sampled within joint limits.
It is then moved rigidly into the camera frame.  Besides its primitives, a
figure carries:

* the 3D position of every Goliath keypoint it models (joint centres,
  surface points such as toes, finger tips, eyes, ears and a few face points),
  with the primitives the keypoint belongs to and a depth tolerance used by
  the visibility test;
* a material per primitive: the ``goliath_28`` class and colour of its skin,
  and up to two clothing *bands* along a primitive coordinate (the axial
  parameter ``s`` of round cones, the local ``u_y`` of ellipsoids) that
  override the class and colour, e.g. a short sleeve on the upper arm.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ._random import FastRandom
from .appearance import Appearance, Outfit, sample_outfit
from .metadata import class_id
from .poses import (
    POSE_KEYS,
    POSE_TO_RAD,
    rx,
    rx_batch,
    ry,
    rz,
    rz_batch,
    sample_pose_vec,
)

# --------------------------------------------------------------------------
# figure


@dataclass
class Material:
    """Class/appearance of a primitive, with up to two clothing bands.

    ``base`` is ``(class_id, appearance_index)``; a band is
    ``(lo, hi, class_id, appearance_index)`` and applies where the band
    coordinate ``v`` satisfies ``lo <= v < hi`` (first band first).  The
    band coordinate is the axial ``s`` of round cones and the local ``u_y``
    of ellipsoids; stripes scale it to metres with the cone length or the
    ellipsoid's y radius.
    """

    base: Tuple[int, int]
    bands: List[Tuple[float, float, int, int]] = field(default_factory=list)
    head: bool = False


@dataclass
class Figure:
    """A posed person: primitives, materials and modelled keypoints.

    Attributes:
        ell_center: (E, 3) ellipsoid centres.
        ell_R: (E, 3, 3) ellipsoid rotations (columns = local axes).
        ell_radii: (E, 3) ellipsoid radii.
        cone_pa, cone_pb: (C, 3) round-cone end centres.
        cone_ra, cone_rb: (C,) round-cone end radii.
        materials: E + C materials (ellipsoids first).
        appearances: Appearances referenced by the materials.
        outfit: The person's outfit (face features use it).
        kp_names: Names of the modelled keypoints.
        kp_pos: (K, 3) keypoint positions.
        kp_owner: (K, E + C) bool, primitives a keypoint belongs to.
        kp_tol: (K,) depth tolerance (metres) of the visibility test.
        kp_normal: (K, 3) outward unit normal of surface keypoints (a
            surface keypoint facing away from the camera is self-occluded),
            zeros for keypoints inside the body (joint centres).
    """

    ell_center: np.ndarray
    ell_R: np.ndarray
    ell_radii: np.ndarray
    cone_pa: np.ndarray
    cone_pb: np.ndarray
    cone_ra: np.ndarray
    cone_rb: np.ndarray
    materials: List[Material]
    appearances: List[Appearance]
    outfit: Outfit
    kp_names: List[str]
    kp_pos: np.ndarray
    kp_owner: np.ndarray
    kp_tol: np.ndarray
    kp_normal: np.ndarray

    def transformed(self, R: np.ndarray, t: np.ndarray) -> 'Figure':
        """Return the figure moved by ``X -> R X + t``."""
        return Figure(
            ell_center=self.ell_center @ R.T + t,
            ell_R=np.einsum('ij,njk->nik', R, self.ell_R),
            ell_radii=self.ell_radii, cone_pa=self.cone_pa @ R.T + t,
            cone_pb=self.cone_pb @ R.T + t, cone_ra=self.cone_ra,
            cone_rb=self.cone_rb, materials=self.materials,
            appearances=self.appearances, outfit=self.outfit,
            kp_names=self.kp_names,
            kp_pos=self.kp_pos @ R.T + t, kp_owner=self.kp_owner,
            kp_tol=self.kp_tol, kp_normal=self.kp_normal @ R.T)

    def lowest_y(self) -> float:
        """Smallest y over the figure's surface (body frame: the soles)."""
        ext = np.sqrt(((self.ell_R[:, 1, :] * self.ell_radii) ** 2).sum(1))
        return float(min((self.ell_center[:, 1] - ext).min(),
                         (self.cone_pa[:, 1] - self.cone_ra).min(),
                         (self.cone_pb[:, 1] - self.cone_rb).min()))

    def highest_y(self) -> float:
        """Largest y over the figure's surface (body frame: top of head)."""
        ext = np.sqrt(((self.ell_R[:, 1, :] * self.ell_radii) ** 2).sum(1))
        return float(max((self.ell_center[:, 1] + ext).max(),
                         (self.cone_pa[:, 1] + self.cone_ra).max(),
                         (self.cone_pb[:, 1] + self.cone_rb).max()))


class _SurfaceGroup:
    """Keypoints at fixed local directions of one ellipsoid."""

    def __init__(self, names: List[str], U: Sequence, owners: List[tuple]):
        self.names = list(names)
        U = np.array(U, float)
        self.U = U / np.sqrt((U * U).sum(1))[:, None]
        self.owners = [tuple(o) for o in owners]


_OWNER_CACHE: Dict[tuple, np.ndarray] = {}


def _owner_matrix(prim_names: Tuple[str, ...], kp_names: Tuple[str, ...],
                  owners: List[Tuple[str, ...]]):
    """(keypoint x primitive) ownership matrix, cached per figure layout."""
    key = (prim_names, kp_names)
    owner = _OWNER_CACHE.get(key)
    if owner is None:
        index = {n: i for i, n in enumerate(prim_names)}
        owner = np.zeros((len(kp_names), len(prim_names)), bool)
        for k, own in enumerate(owners):
            owner[k, [index[o] for o in own]] = True
        owner.setflags(write=False)
        _OWNER_CACHE[key] = owner
    return owner


class _Builder:
    """Accumulates primitives and keypoints while the skeleton is posed.

    Keypoints are stored in blocks ``(names, pos (n, 3), owners, tol (n,),
    normal (n, 3))``; surface keypoints on ellipsoids come in precomputed
    groups (:class:`_SurfaceGroup`) placed with one matrix product.
    """

    def __init__(self):
        self.ells: List[tuple] = []
        self.cones: List[tuple] = []
        self.kp_blocks: List[tuple] = []
        self._ell_index: Dict[str, int] = {}

    def ellipsoid(self, name, c, R, r, mat: Material):
        self._ell_index[name] = len(self.ells)
        self.ells.append((name, np.asarray(c, float), R, np.asarray(r, float),
                          mat))

    def cone(self, name, pa, pb, ra, rb, mat: Material):
        self.cones.append((name, pa, pb, ra, rb, mat))

    def kp(self, name: str, pos, owners: Sequence[str], tol: float,
           normal=None):
        """Add a keypoint; ``normal`` marks a surface point (unit vector)."""
        self.kp_blocks.append(([name], pos[None], [tuple(owners)], (tol,),
                               (_ZERO3 if normal is None else normal)[None]))

    def kps(self, names: List[str], pos: np.ndarray, owners: List[tuple],
            tol: Sequence[float], normal: Optional[np.ndarray] = None):
        """Add a block of keypoints (``normal`` (n, 3) for surface points)."""
        self.kp_blocks.append((names, pos, owners, tol, np.zeros_like(pos)
                               if normal is None else normal))

    def surface_group(self, ell: str, group: '_SurfaceGroup', tol: float):
        """Add a precomputed group of keypoints on ellipsoid ``ell``."""
        _, c, R, r, _ = self.ells[self._ell_index[ell]]
        n = (group.U / r) @ R.T
        n /= np.sqrt((n * n).sum(1))[:, None]
        self.kps(group.names, c + (group.U * r) @ R.T, group.owners,
                 [tol] * len(group.names), n)

    def build(self, appearances, outfit) -> Figure:
        blocks = self.kp_blocks
        kp_names = tuple(n for blk in blocks for n in blk[0])
        names = tuple([e[0] for e in self.ells] + [c[0] for c in self.cones])
        owner = _owner_matrix(names, kp_names,
                              [o for blk in blocks for o in blk[2]])
        pa = np.array([c[1] for c in self.cones])
        pb = np.array([c[2] for c in self.cones])
        ra = np.array([c[3] for c in self.cones], float)
        rb = np.array([c[4] for c in self.cones], float)
        # a round cone needs |pb - pa| > |ra - rb|: shrink the radius gap
        L = np.sqrt(((pb - pa) ** 2).sum(1))
        bad = L <= np.abs(ra - rb) + 1e-4
        rb[bad] = ra[bad] - np.sign(ra[bad] - rb[bad]) * \
            np.maximum(L[bad] - 1e-4, 0)
        return Figure(
            ell_center=np.array([e[1] for e in self.ells]),
            ell_R=np.array([e[2] for e in self.ells]),
            ell_radii=np.array([e[3] for e in self.ells]),
            cone_pa=pa, cone_pb=pb, cone_ra=ra, cone_rb=rb,
            materials=[e[4] for e in self.ells] + [c[5] for c in self.cones],
            appearances=appearances, outfit=outfit,
            kp_names=list(kp_names),
            kp_pos=np.concatenate([blk[1] for blk in blocks]),
            kp_owner=owner,
            kp_tol=np.array([t for blk in blocks for t in blk[3]]),
            kp_normal=np.concatenate([blk[4] for blk in blocks]))


# Face features in head-local unit-sphere coordinates (x: person's left,
# y: up, z: facing direction).  Shared with the renderer's face shader.
EYE_UV = (0.36, 0.10)      # (|u_x|, u_y) of the eye centres
EYE_AXES = (0.14, 0.065)   # sclera half axes
IRIS_R = 0.055
BROW_UV = (0.36, 0.27)
BROW_AXES = (0.16, 0.035)
MOUTH_UV = (0.0, -0.47)
MOUTH_AXES = (0.27, 0.085)

_FINGERS = (  # name, MCP z offset (x palm width), phalanx lengths (m)
    ('forefinger', 0.36, (0.045, 0.026, 0.020)),
    ('middle_finger', 0.12, (0.050, 0.030, 0.022)),
    ('ring_finger', -0.12, (0.046, 0.028, 0.021)),
    ('pinky_finger', -0.36, (0.036, 0.021, 0.019)),
)


_FINGER_NAMES = tuple(f[0] for f in _FINGERS) + ('thumb',)
_PHALANX = np.array([f[2] for f in _FINGERS] + [(0.042, 0.032, 0.027)])
_FINGER_FLEX = np.array([85.0, 100.0, 75.0])
_THUMB_FLEX = np.array([15.0, 35.0, 45.0])
_K3 = np.arange(3)
_PH_RA = np.vstack([np.tile(1 - .1 * _K3, (4, 1)), 1.25 * (1 - .1 * _K3)])
_PH_RB = np.vstack([np.tile(0.9 - .1 * _K3, (4, 1)), 1.15 * (0.95 - .1 * _K3)])


_ZERO3 = np.zeros(3)


_HAND_KP_NAMES = {side: [f'{side}_{f}{k}' for f in _FINGER_NAMES
                         for k in ('_third_joint', '2', '3', '4')]
                  for side in ('left', 'right')}
_HAND_KP_OWNERS = {p: [o for f in _FINGER_NAMES for o in (
    (p + f + '0', p + 'palm'), (p + f + '0', p + f + '1'),
    (p + f + '1', p + f + '2'), (p + f + '2',))] for p in ('l_', 'r_')}
_HAND_KP_TOL = [0.02, 0.015, 0.015, 0.012] * 5


def _face_u(x: float, y: float) -> Tuple[float, float, float]:
    """Front-facing head-local unit direction with the given u_x, u_y."""
    return (x, y, float(np.sqrt(max(1 - x * x - y * y, 0.0))))


def _head_groups():
    face = ('head', 'nose')
    names, U, owners = [], [], []

    def add(name, u, own=face):
        names.append(name)
        U.append(u)
        owners.append(own)

    ex, ey = EYE_UV
    for side, sg, q in (('left', 1.0, 'l'), ('right', -1.0, 'r')):
        for nm in (f'{side}_eye', f'{q}_center_of_iris',
                   f'{q}_center_of_pupil'):
            add(nm, _face_u(sg * ex, ey))
        add(f'{side}_ear', (sg * 0.97, 0.0, -0.22), ('head',))
        add(f'end_of_{q}_eyebrow',
            _face_u(sg * (BROW_UV[0] + BROW_AXES[0]), BROW_UV[1]))
        add(f'{q}_outer_corner_of_mouth',
            _face_u(sg * MOUTH_AXES[0], MOUTH_UV[1]))
    for nm, uy in (('center_of_glabella', BROW_UV[1]),
                   ('center_of_nose_root', 0.12),
                   ('center_of_cupid_bow', MOUTH_UV[1] + 0.8 * MOUTH_AXES[1]),
                   ('center_of_lower_outer_lip', MOUTH_UV[1] - MOUTH_AXES[1]),
                   ('center_of_labiomental_groove', -0.66),
                   ('tip_of_chin', -0.86)):
        add(nm, _face_u(0, uy))
    return _SurfaceGroup(names, U, owners)


_HEAD_KPS = _head_groups()
_NOSE_KPS = _SurfaceGroup(['nose', 'tip_of_nose'], [(0, -0.25, 0.97)] * 2,
                          [('head', 'nose')] * 2)
_FOOT_KPS = {side: _SurfaceGroup(
    [f'{side}_big_toe', f'{side}_small_toe', f'{side}_heel'],
    [(-sg * 0.3, -0.2, 0.93), (sg * 0.55, -0.25, 0.8), (0, -0.35, -0.94)],
    [(side[0] + '_foot',)] * 3) for side, sg in (('left', 1.0),
                                                 ('right', -1.0))}


def build_figure(rng: Union[np.random.Generator, FastRandom],
                 pose: Optional[Dict[str, float]] = None,
                 outfit: Optional[Outfit] = None) -> Figure:
    """Sample proportions, pose and outfit and build a figure (body frame).

    The figure stands on the floor ``y = 0`` (its lowest point touches it).

    Args:
        rng: Random generator (numpy or :class:`FastRandom`).
        pose: Joint angles (degrees); sampled with :func:`sample_pose` when
            omitted.
        outfit: Clothing; sampled with :func:`sample_outfit` when omitted.

    Returns:
        The posed :class:`Figure` in the body frame.
    """
    if not isinstance(rng, FastRandom):
        rng = FastRandom(rng)
    vec = sample_pose_vec(rng) if pose is None else \
        np.array([pose[k] for k in POSE_KEYS], float)
    if outfit is None:
        outfit = sample_outfit(rng)
    d2r = np.pi / 180
    P = dict(zip(POSE_KEYS, (vec * POSE_TO_RAD).tolist()))
    # ---------------- proportions ------------------------------------------
    height = rng.uniform(1.5, 1.95) if rng.random() > 0.08 else \
        rng.uniform(1.2, 1.5)
    s = height / 1.75
    g = rng.uniform(0.85, 1.3)                     # girth
    sh = s ** 0.4                                   # head/hand scale
    j = lambda: rng.uniform(0.94, 1.06)  # noqa: E731 per-segment jitter
    L_th, L_sh, L_ua, L_la = 0.43 * s * j(), 0.42 * s * j(), \
        0.29 * s * j(), 0.255 * s * j()
    L_spine = 0.45 * s * j()
    sh_half = 0.17 * s * rng.uniform(0.9, 1.12)
    hip_half = 0.085 * s * rng.uniform(0.9, 1.15)
    r_ua, r_la = 0.048 * g, 0.037 * g
    r_th, r_shin = 0.082 * g * rng.uniform(0.95, 1.1), 0.052 * g
    hx, hy, hz = 0.078 * sh * j(), 0.108 * sh * j(), 0.096 * sh * j()

    # ---------------- appearance tables -------------------------------------
    skin = Appearance(outfit.skin, outfit.skin, 0.0, 0.12)
    apps = [skin, Appearance(outfit.hair, outfit.hair, 0.0, 0.2)]
    APP_SKIN, APP_HAIR = 0, 1

    def app(a: Optional[Appearance]) -> int:
        if a is None:
            return -1
        apps.append(a)
        return len(apps) - 1

    APP_TOP, APP_BOT = app(outfit.top), app(outfit.bottom)
    APP_SHOE, APP_SOCK = app(outfit.shoes), app(outfit.socks)
    C = class_id
    top_cls = C('Upper_Clothing')
    bot_cls = C('Lower_Clothing')

    def skin_mat(cls: str, bands=()) -> Material:
        return Material((C(cls), APP_SKIN), list(bands))

    top_band = (lambda lo, hi: [(lo, hi, top_cls, APP_TOP)]) \
        if outfit.top is not None else (lambda lo, hi: [])

    b = _Builder()
    # ---------------- trunk -------------------------------------------------
    R_pel = rx(P['pelvis_pitch'])
    R_sp = R_pel @ ry(P['spine_twist']) @ rz(P['spine_lat']) @ \
        rx(P['spine_fwd'])
    origin = np.zeros(3)
    pel_c = origin + R_pel @ np.array([0, 0.02 * s, -0.005])
    pel_r = np.array([hip_half + 0.07 * g, 0.15 * s, 0.1 * g])
    pel_bands = top_band(outfit.hem, 2.0) + \
        [(-2.0, outfit.waist, bot_cls, APP_BOT)]
    b.ellipsoid('pelvis', pel_c, R_pel, pel_r, Material(
        (C('Torso'), APP_SKIN), pel_bands))
    chest_c = origin + R_sp @ np.array([0, 0.30 * s, 0])
    chest_r = np.array([sh_half * 0.92 * np.sqrt(g), 0.2 * s, 0.1 * g])
    chest_mat = Material((top_cls, APP_TOP) if outfit.top is not None else
                         (C('Torso'), APP_SKIN), [])
    b.ellipsoid('chest', chest_c, R_sp, chest_r, chest_mat)
    neck_base = origin + R_sp @ np.array([0, L_spine + 0.04 * s, -0.01])
    # ---------------- head & neck --------------------------------------------
    R_head = R_sp @ ry(P['neck_yaw']) @ rz(P['neck_roll']) @ \
        rx(P['neck_pitch'])
    R_nmid = R_sp @ ry(P['neck_yaw'] / 2) @ rz(P['neck_roll'] / 2) @ \
        rx(P['neck_pitch'] / 2)
    atlas = neck_base + R_nmid @ np.array([0, 0.1 * s, 0])
    head_c = atlas + R_head @ np.array([0, 0.075 * sh, 0.012 * sh])
    head_mat = Material((C('Face_Neck'), APP_SKIN), [], head=True)
    b.ellipsoid('head', head_c, R_head, (hx, hy, hz), head_mat)
    r_neck = 0.052 * np.sqrt(g) * sh
    b.cone('neck', neck_base - R_sp @ np.array([0, 0.05 * s, 0]),
           atlas + R_head @ np.array([0, 0.01, -0.01]), r_neck,
           r_neck * 0.9, skin_mat('Face_Neck'))
    R_nose = R_head @ rx(0.35)
    nose_c = head_c + R_head @ np.array([0, -0.06 * hy, 0.93 * hz])
    nose_r = np.array([0.013, 0.024, 0.02]) * sh
    b.ellipsoid('nose', nose_c, R_nose, nose_r, skin_mat('Face_Neck'))
    if outfit.long_hair:
        b.ellipsoid('hair_back', head_c + R_head @ np.array(
            [0, -0.55 * hy, -0.5 * hz]), R_head @ rx(-0.15),
            (hx * 1.12, hy * 1.35, hz * 0.7),
            Material((C('Hair'), APP_HAIR)))
    # ---------------- arms -------------------------------------------------
    for side, sg in (('left', 1.0), ('right', -1.0)):
        p = side[0] + '_'
        S = origin + R_sp @ np.array([sg * sh_half, 0.43 * s, -0.01])
        up_tr = R_sp @ np.array([0.0, 1.0, 0.0])
        sh_mat = Material((top_cls, APP_TOP) if outfit.top is not None
                          else (C('Torso'), APP_SKIN))
        b.cone(p + 'shoulder', neck_base - R_sp @ np.array(
            [0, 0.03 * s, 0]), S, 0.06 * g, r_ua * 1.02, sh_mat)
        R_ua = R_sp @ rz(sg * P[p + 'sh_abd']) @ rx(-P[p + 'sh_flex']) @ \
            ry(sg * P[p + 'sh_twist'])
        E = S + R_ua @ np.array([0, -L_ua, 0])
        b.cone(p + 'upper_arm', S, E, r_ua, r_ua * 0.82, skin_mat(
            side.capitalize() + '_Upper_Arm',
            top_band(-1.0, outfit.sleeve_upper)))
        R_la = R_ua @ rx(-P[p + 'elbow'])
        Wr = E + R_la @ np.array([0, -L_la, 0])
        b.cone(p + 'lower_arm', E, Wr, r_la, r_la * 0.72, skin_mat(
            side.capitalize() + '_Lower_Arm',
            top_band(-1.0, outfit.sleeve_lower)))
        # hand frame: y along the hand (towards the wrist), palm faces -sg*x,
        # thumb side +z
        R_h = R_la @ rz(sg * P[p + 'wr_dev']) @ rx(-P[p + 'wr_flex'])
        hand_cls = side.capitalize() + '_Hand'
        L_palm = 0.095 * sh
        b.ellipsoid(p + 'palm', Wr + R_h @ np.array([0, -0.5 * L_palm, 0]),
                    R_h, np.array([0.017, 0.056, 0.044]) * sh,
                    skin_mat(hand_cls))
        grip, th = P[p + 'grip'], P[p + 'thumb']
        rf = 0.0085 * sh
        # four fingers + thumb as batched 3-phalanx chains
        zoff = np.array([f[1] for f in _FINGERS])
        base = np.zeros((5, 3))
        base[:4, 1], base[:4, 2] = -L_palm, zoff * 0.088 * sh
        base[4] = (-sg * 0.006, -0.02 * sh, 0.03 * sh)
        R = np.empty((5, 3, 3))
        R[:4] = R_h @ rx_batch(-zoff * 0.35 * (1 - grip))
        R[4] = R_h @ rx(-0.75 + 0.3 * th) @ rz(-sg * (0.35 + 0.5 * th))
        curl = np.empty((5, 3))
        curl[:4] = np.outer(grip * rng.uniform(0.85, 1.15, size=4),
                            _FINGER_FLEX)
        curl[4] = th * _THUMB_FLEX
        curl *= -sg * d2r
        pts = [Wr + base @ R_h.T]
        for k in range(3):
            R = R @ rz_batch(curl[:, k])
            pts.append(pts[-1] - (_PHALANX[:, k] * sh)[:, None] * R[:, :, 1])
        tips = pts[3] - R[:, :, 1] * (rf * np.array([.7, .7, .7, .7, 1.0])
                                      )[:, None]
        hand_mat = skin_mat(hand_cls)
        for i, fname in enumerate(_FINGER_NAMES):
            q = p + fname
            for k in range(3):
                b.cone(f'{q}{k}', pts[k][i], pts[k + 1][i],
                       _PH_RA[i, k] * rf, _PH_RB[i, k] * rf, hand_mat)
        # per finger: knuckle (third_joint), 2, 3 (inside), tip (surface)
        normal = np.zeros((20, 3))
        normal[3::4] = -R[:, :, 1]
        b.kps(_HAND_KP_NAMES[side], np.stack(
            [pts[0], pts[1], pts[2], tips], 1).reshape(20, 3),
            _HAND_KP_OWNERS[p], _HAND_KP_TOL, normal)
        # arm keypoints
        arm = [p + 'upper_arm', p + 'lower_arm']
        sh_own = [p + 'upper_arm', p + 'shoulder', 'chest']
        b.kp(f'{side}_shoulder', S, sh_own, 1.5 * r_ua + 0.02)
        b.kp(f'{side}_acromion', S + up_tr * r_ua * 1.02, sh_own, 0.025,
             up_tr)
        b.kp(f'{side}_elbow', E, arm, 1.5 * r_ua + 0.02)
        back = -(R_ua @ rx(-P[p + 'elbow'] / 2))[:, 2]  # behind the elbow
        b.kp(f'{side}_olecranon', E + back * r_ua * 0.82, arm, 0.02, back)
        b.kp(f'{side}_cubital_fossa', E - back * r_ua * 0.82, arm, 0.02,
             -back)
        b.kp(f'{side}_wrist', Wr, [p + 'lower_arm', p + 'palm'],
             1.5 * r_la + 0.02)
    # ---------------- legs -------------------------------------------------
    for side, sg in (('left', 1.0), ('right', -1.0)):
        p = side[0] + '_'
        Side = side.capitalize()
        Hj = origin + R_pel @ np.array([sg * hip_half, -0.06 * s, 0])
        R_th = R_pel @ rz(sg * P[p + 'hip_abd']) @ rx(-P[p + 'hip_flex']) @ \
            ry(sg * P[p + 'hip_twist'])
        Kn = Hj + R_th @ np.array([0, -L_th, 0])
        b.cone(p + 'thigh', Hj + R_th @ np.array([0, 0.04 * s, 0]), Kn, r_th,
               r_th * 0.68, skin_mat(f'{Side}_Upper_Leg', [
                   (-1.0, outfit.pants_thigh, bot_cls, APP_BOT)]))
        R_sh = R_th @ rx(P[p + 'knee'])
        An = Kn + R_sh @ np.array([0, -L_sh, 0])
        shin_bands = [(-1.0, outfit.pants_shin, bot_cls, APP_BOT)]
        if outfit.socks is not None:
            shin_bands.append((outfit.sock_top, 2.0, C(f'{Side}_Sock'),
                               APP_SOCK))
        b.cone(p + 'shin', Kn, An, r_shin, r_shin * 0.7,
               skin_mat(f'{Side}_Lower_Leg', shin_bands))
        # keep the sole roughly parallel to the pelvis, then apply the ankle
        R_ft = R_sh @ rx(P[p + 'hip_flex'] - P[p + 'knee']) @ \
            rx(P[p + 'ankle']) @ ry(sg * 0.12)
        foot_c = An + R_ft @ np.array([0, -0.035 * s, 0.05 * s])
        foot_r = np.array([0.045 * np.sqrt(g), 0.038, 0.128]) * s
        foot_mat = Material((C(f'{Side}_Shoe'), APP_SHOE)) \
            if outfit.shoes is not None else skin_mat(f'{Side}_Foot')
        b.ellipsoid(p + 'foot', foot_c, R_ft, foot_r, foot_mat)
        b.kp(f'{side}_hip', Hj, [p + 'thigh', 'pelvis'], 1.4 * r_th + 0.02)
        b.kp(f'{side}_knee', Kn, [p + 'thigh', p + 'shin'],
             1.5 * r_shin + 0.02)
        b.kp(f'{side}_ankle', An, [p + 'shin', p + 'foot'],
             1.5 * r_shin + 0.02)
        b.surface_group(p + 'foot', _FOOT_KPS[side], 0.025)
    # ---------------- head keypoints -----------------------------------------
    tol = 0.02 * sh
    b.surface_group('nose', _NOSE_KPS, tol)
    b.surface_group('head', _HEAD_KPS, tol)
    b.kp('neck', neck_base, ['neck', 'chest', 'l_shoulder', 'r_shoulder'],
         1.5 * r_neck + 0.02)
    fig = b.build(apps, outfit)
    low = fig.lowest_y()
    for arr in (fig.ell_center, fig.cone_pa, fig.cone_pb, fig.kp_pos):
        arr[:, 1] -= low
    return fig


@lru_cache(maxsize=None)
def modelled_keypoints() -> Tuple[str, ...]:
    """Names of the Goliath keypoints a figure models (all others: v = 0)."""
    fig = build_figure(np.random.default_rng(0))
    return tuple(sorted(fig.kp_names))
