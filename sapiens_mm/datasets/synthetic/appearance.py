"""Appearance of the synthetic figure: skin, hair, eye and clothing colours,
and the outfit sampler (sleeve and leg lengths, colours)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

from ._random import Cumulative, FastRandom

# --------------------------------------------------------------------------
# appearance

_SKIN = np.array([[255, 224, 196], [241, 194, 167], [224, 172, 138],
                  [198, 134, 98], [161, 102, 70], [122, 78, 52],
                  [92, 58, 40], [70, 45, 32]], float) / 255
_HAIR = np.array([[22, 18, 16], [45, 30, 20], [75, 50, 30], [110, 75, 45],
                  [190, 160, 100], [130, 55, 25], [140, 140, 140],
                  [215, 215, 210]], float) / 255
_HAIR_P = np.array([5, 4, 3, 2, 1.5, 0.7, 0.6, 0.3])
_HAIR_CUM = Cumulative.of(_HAIR_P)
_SLEEVE_CUM = Cumulative.of([0.15, 0.4, 0.1, 0.35])
_LENGTH_CUM = Cumulative.of([0.25, 0.1, 0.65])
_EYES = np.array([[40, 25, 15], [70, 45, 25], [60, 90, 120],
                  [70, 100, 60]], float) / 255


def _hsv(h: float, s: float, v: float) -> np.ndarray:
    """HSV (all in [0, 1]) to RGB."""
    i = int(h * 6) % 6
    f = h * 6 - int(h * 6)
    p, q, t = v * (1 - s), v * (1 - f * s), v * (1 - (1 - f) * s)
    return np.array([(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v),
                     (v, p, q)][i])


def _cloth_colour(rng: FastRandom) -> np.ndarray:
    """A plausible garment colour: neutrals, denim or a random hue."""
    r = rng.random()
    if r < 0.25:  # black / grey / white
        return np.full(3, rng.choice([0.08, 0.2, 0.45, 0.75, 0.92])) + \
            0.03 * rng.standard_normal(size=3)
    if r < 0.4:  # denim / navy
        return _hsv(0.6 + 0.03 * rng.standard_normal(), rng.uniform(0.4, 0.7),
                    rng.uniform(0.2, 0.6))
    return _hsv(rng.random(), rng.uniform(0.2, 0.9), rng.uniform(0.2, 0.95))


@dataclass
class Appearance:
    """Surface look shared by the primitives that use it.

    Attributes:
        rgb: Base albedo, RGB in [0, 1].
        rgb2: Second colour of the stripe pattern.
        freq: Stripe frequency in stripes per metre (0: plain).
        spec: Specular strength.
    """

    rgb: np.ndarray
    rgb2: np.ndarray
    freq: float = 0.0
    spec: float = 0.05


@dataclass
class Outfit:
    """Clothing and appearance parameters of one person."""

    skin: np.ndarray
    hair: np.ndarray
    eyes: np.ndarray
    top: Optional[Appearance]     # None: bare torso
    bottom: Appearance
    shoes: Optional[Appearance]   # None: barefoot
    socks: Optional[Appearance]
    sleeve_upper: float           # sleeve end on the upper arm (s in [0, 1])
    sleeve_lower: float           # sleeve end on the forearm (0: none)
    hem: float                    # shirt hem on the pelvis (local u_y)
    waist: float                  # trouser waist on the pelvis (local u_y)
    pants_thigh: float            # trouser end on the thigh (s)
    pants_shin: float             # trouser end on the shin (s)
    sock_top: float               # sock top on the shin (s), > 1: none
    hairline_front: float         # head-local u_y above which hair is drawn
    hairline_back: float
    long_hair: bool


def sample_outfit(rng: Union[np.random.Generator, FastRandom]) -> Outfit:
    """Sample skin, hair and clothing of a person.

    Args:
        rng: Random generator (numpy or :class:`FastRandom`).

    Returns:
        The sampled :class:`Outfit`.
    """
    if not isinstance(rng, FastRandom):
        rng = FastRandom(rng)
    skin = _SKIN[rng.integers(len(_SKIN))] * rng.uniform(0.92, 1.05) + \
        0.02 * rng.standard_normal(size=3)
    hair = _HAIR[rng.choice(len(_HAIR), p=_HAIR_CUM)]
    eyes = _EYES[rng.integers(len(_EYES))]

    def garment(spec=0.04):
        c = np.clip(_cloth_colour(rng), 0.02, 1)
        striped = rng.random() < 0.18
        c2 = np.clip(_cloth_colour(rng), 0.02, 1) if striped else c
        return Appearance(c, c2, rng.uniform(8, 30) if striped else 0.0, spec)

    top = garment() if rng.random() > 0.07 else None
    sleeve = rng.choice(4, p=_SLEEVE_CUM)  # none / short / elbow / long
    sleeve_upper = [0.0, rng.uniform(0.3, 0.6), 1.01, 1.01][sleeve]
    sleeve_lower = [0.0, 0.0, rng.uniform(0.1, 0.3),
                    rng.uniform(0.85, 0.97)][sleeve]
    if top is None:
        sleeve_upper = sleeve_lower = 0.0
    bottom = garment()
    length = rng.choice(3, p=_LENGTH_CUM)  # shorts / capri / long
    pants_thigh = [rng.uniform(0.35, 0.8), 1.01, 1.01][length]
    pants_shin = [0.0, rng.uniform(0.4, 0.7), rng.uniform(0.88, 1.01)][length]
    shoes = None
    if rng.random() < 0.88:
        shoes = Appearance(np.clip(_cloth_colour(rng) * 0.8, 0.02, 1),
                           np.zeros(3), 0.0, 0.15)
        shoes.rgb2 = shoes.rgb
    socks = None
    sock_top = 2.0
    if shoes is not None and length != 2 and rng.random() < 0.6:
        c = np.clip(_cloth_colour(rng), 0.02, 1)
        socks = Appearance(c, c, 0.0, 0.02)
        sock_top = rng.uniform(0.6, 0.9)
    bald = rng.random() < 0.06
    return Outfit(
        skin=np.clip(skin, 0.05, 1), hair=hair, eyes=eyes, top=top,
        bottom=bottom, shoes=shoes, socks=socks,
        sleeve_upper=float(sleeve_upper), sleeve_lower=float(sleeve_lower),
        hem=float(rng.uniform(-0.45, 0.1)), waist=float(rng.uniform(0.1, 0.6)),
        pants_thigh=float(pants_thigh), pants_shin=float(pants_shin),
        sock_top=float(sock_top),
        hairline_front=9.0 if bald else float(rng.uniform(0.3, 0.6)),
        hairline_back=9.0 if bald else float(rng.uniform(-0.75, -0.2)),
        long_hair=(not bald) and rng.random() < 0.3)


