"""Rotations and the pose space of the synthetic figure: joint limits,
base poses and the sampler of joint angles (radians, body frame; see
:mod:`.figure`)."""
from __future__ import annotations

import math
from typing import Dict, Tuple, Union

import numpy as np

from ._random import Cumulative, FastRandom

# --------------------------------------------------------------------------
# rotations


def rx(a: float) -> np.ndarray:
    """Rotation about x by ``a`` radians."""
    c, s = math.cos(a), math.sin(a)
    return np.array(((1.0, 0.0, 0.0), (0.0, c, -s), (0.0, s, c)))


def ry(a: float) -> np.ndarray:
    """Rotation about y by ``a`` radians."""
    c, s = math.cos(a), math.sin(a)
    return np.array(((c, 0.0, s), (0.0, 1.0, 0.0), (-s, 0.0, c)))


def rz(a: float) -> np.ndarray:
    """Rotation about z by ``a`` radians."""
    c, s = math.cos(a), math.sin(a)
    return np.array(((c, -s, 0.0), (s, c, 0.0), (0.0, 0.0, 1.0)))


def rz_batch(a: np.ndarray) -> np.ndarray:
    """Rotations about z by the angles ``a`` (n,), shape (n, 3, 3)."""
    c, s = np.cos(a), np.sin(a)
    R = np.zeros((len(a), 3, 3))
    R[:, 0, 0], R[:, 0, 1], R[:, 1, 0], R[:, 1, 1] = c, -s, s, c
    R[:, 2, 2] = 1.0
    return R


def rx_batch(a: np.ndarray) -> np.ndarray:
    """Rotations about x by the angles ``a`` (n,), shape (n, 3, 3)."""
    c, s = np.cos(a), np.sin(a)
    R = np.zeros((len(a), 3, 3))
    R[:, 1, 1], R[:, 1, 2], R[:, 2, 1], R[:, 2, 2] = c, -s, s, c
    R[:, 0, 0] = 1.0
    return R


# --------------------------------------------------------------------------
# pose space

#: Joint limits in degrees (``l_``/``r_`` joints share the limits of their
#: un-prefixed name).  ``grip`` (finger curl) is in [0, 1].
JOINT_LIMITS: Dict[str, Tuple[float, float]] = {
    'pelvis_pitch': (-10, 25), 'spine_fwd': (-20, 50), 'spine_lat': (-25, 25),
    'spine_twist': (-35, 35), 'neck_pitch': (-40, 45), 'neck_yaw': (-70, 70),
    'neck_roll': (-30, 30), 'sh_abd': (-15, 170), 'sh_flex': (-55, 175),
    'sh_twist': (-70, 70), 'elbow': (0, 150), 'wr_flex': (-60, 60),
    'wr_dev': (-20, 30), 'hip_flex': (-25, 125), 'hip_abd': (-15, 50),
    'hip_twist': (-35, 35), 'knee': (0, 150), 'ankle': (-25, 45),
    'grip': (0, 1), 'thumb': (0, 1),
}
_SIDED = ('sh_abd', 'sh_flex', 'sh_twist', 'elbow', 'wr_flex', 'wr_dev',
          'hip_flex', 'hip_abd', 'hip_twist', 'knee', 'ankle', 'grip',
          'thumb')
_CENTRAL = ('pelvis_pitch', 'spine_fwd', 'spine_lat', 'spine_twist',
            'neck_pitch', 'neck_yaw', 'neck_roll')
_ODD = ('spine_lat', 'spine_twist', 'neck_yaw', 'neck_roll')  # flip sign


def _pose(**kw) -> Dict[str, float]:
    """Expand a base pose: ``x=v`` sets both sides, ``l_x``/``r_x`` one."""
    out: Dict[str, float] = {}
    for k, v in kw.items():
        if k in _SIDED:
            out['l_' + k] = out['r_' + k] = v
        else:
            out[k] = v
    return out


#: Base poses (degrees) the sampler perturbs.
BASE_POSES: Dict[str, Dict[str, float]] = {
    'stand': _pose(sh_abd=10, elbow=10, grip=0.3),
    'relaxed': _pose(sh_abd=12, sh_flex=10, elbow=35, hip_abd=8, grip=0.5,
                     l_hip_flex=8, l_knee=12),
    'walk': _pose(l_hip_flex=25, r_hip_flex=-12, l_knee=8, r_knee=30,
                  l_sh_flex=-25, r_sh_flex=25, sh_abd=8, elbow=20, grip=0.4),
    'run': _pose(l_hip_flex=60, r_hip_flex=-15, l_knee=70, r_knee=95,
                 l_sh_flex=-45, r_sh_flex=55, sh_abd=12, elbow=90,
                 spine_fwd=12, grip=0.8, r_ankle=30),
    'arms_up': _pose(sh_abd=155, elbow=15, hip_abd=6, grip=0.1),
    't_pose': _pose(sh_abd=90, elbow=5, hip_abd=5, grip=0.1),
    'wave': _pose(l_sh_abd=100, l_sh_twist=-60, l_elbow=95, r_sh_abd=10,
                  r_elbow=15, grip=0.15),
    'reach': _pose(l_sh_flex=110, r_sh_flex=20, l_elbow=10, r_elbow=30,
                   spine_fwd=10, grip=0.3, sh_abd=10),
    'squat': _pose(hip_flex=105, knee=120, hip_abd=20, spine_fwd=25,
                   sh_flex=70, elbow=30, grip=0.5),
    'lunge': _pose(l_hip_flex=75, l_knee=85, r_hip_flex=-20, r_knee=15,
                   sh_abd=15, elbow=25, grip=0.5),
    'kneel': _pose(l_hip_flex=85, l_knee=90, r_hip_flex=0, r_knee=95,
                   sh_abd=10, elbow=30, grip=0.5),
    'bend': _pose(pelvis_pitch=20, spine_fwd=45, sh_flex=70, elbow=20,
                  knee=10, grip=0.4),
    'hands_on_hips': _pose(sh_abd=45, sh_flex=-20, sh_twist=50, elbow=110,
                           grip=0.6),
    'arms_crossed': _pose(sh_flex=45, sh_abd=-5, sh_twist=-60, elbow=120,
                          grip=0.7),
}
_BASE_WEIGHTS = {'stand': 3, 'relaxed': 2, 'walk': 3, 'run': 1.5,
                 'arms_up': 1, 't_pose': 0.5, 'wave': 1, 'reach': 1,
                 'squat': 0.8, 'lunge': 0.8, 'kneel': 0.6, 'bend': 0.6,
                 'hands_on_hips': 0.8, 'arms_crossed': 0.6, 'random': 1.0}


_BASE_CUM = Cumulative.of(list(_BASE_WEIGHTS.values()))
POSE_KEYS = list(_CENTRAL) + ['l_' + k for k in _SIDED] + \
    ['r_' + k for k in _SIDED]


def _limits(name: str) -> Tuple[float, float]:
    """Joint limits of a (possibly side-prefixed) joint name."""
    key = name[2:] if name[:2] in ('l_', 'r_') else name
    return JOINT_LIMITS[key]


_KEY_INDEX = {k: i for i, k in enumerate(POSE_KEYS)}
_LO = np.array([_limits(k)[0] for k in POSE_KEYS], float)
_HI = np.array([_limits(k)[1] for k in POSE_KEYS], float)
_SD = np.array([0.15 if k.endswith(('grip', 'thumb')) else
                14.0 if k.startswith('neck') else 9.0 for k in POSE_KEYS])
_BASE_VECS = {n: np.array([p.get(k, 0.0) for k in POSE_KEYS])
              for n, p in BASE_POSES.items()}
_MIRROR = np.array([_KEY_INDEX['r_' + k[2:]] if k.startswith('l_') else
                    _KEY_INDEX['l_' + k[2:]] if k.startswith('r_') else i
                    for i, k in enumerate(POSE_KEYS)])
_MIRROR_SIGN = np.array([-1.0 if k in _ODD else 1.0 for k in POSE_KEYS])
_HIP_FLEX = [_KEY_INDEX['l_hip_flex'], _KEY_INDEX['r_hip_flex']]
#: degrees -> radians for angles, 1 for the unitless grip / thumb
POSE_TO_RAD = np.where([k.endswith(('grip', 'thumb')) for k in POSE_KEYS], 1.0,
                   np.pi / 180)


def sample_pose_vec(rng: FastRandom) -> np.ndarray:
    """Joint angles in :data:`POSE_KEYS` order (see :func:`sample_pose`)."""
    names = list(_BASE_WEIGHTS)
    base_name = names[rng.choice(len(names), p=_BASE_CUM)]
    n = len(POSE_KEYS)
    if base_name == 'random':
        v = (_LO + _HI) / 2 + (_HI - _LO) / 2 * 0.7 * (
            2 * rng.random(size=n) - 1)
        v[_HIP_FLEX] = 0.0  # keep a stance
    else:
        v = _BASE_VECS[base_name] + _SD * rng.standard_normal(size=n)
    v[_KEY_INDEX['neck_yaw']] += 20.0 * rng.standard_normal()
    if rng.random() < 0.5:  # mirror left <-> right
        v = v[_MIRROR] * _MIRROR_SIGN
    return np.clip(v, _LO, _HI)


def sample_pose(rng: Union[np.random.Generator, FastRandom]
                ) -> Dict[str, float]:
    """Sample joint angles (degrees; ``grip``/``thumb`` in [0, 1]).

    A base pose is drawn from :data:`BASE_POSES` (or uniformly within a
    shrunk joint range), perturbed with Gaussian noise, possibly mirrored and
    finally clipped to :data:`JOINT_LIMITS`.

    Args:
        rng: Random generator (numpy or :class:`FastRandom`).

    Returns:
        Mapping joint name -> angle, covering every joint of the figure.
    """
    if not isinstance(rng, FastRandom):
        rng = FastRandom(rng)
    return dict(zip(POSE_KEYS, sample_pose_vec(rng).tolist()))


