"""Soft person mask and RGBA cut-outs from segmentation logits."""
import numpy as np
import pytest
from scipy.special import softmax

from sapiens_mm.utils.foreground import person_cutouts, rgba_cutout, soft_foreground


def test_soft_foreground_is_one_minus_background_probability():
    rng = np.random.default_rng(0)
    logits = rng.normal(0, 3, (28, 6, 5))
    expected = 1 - softmax(logits, axis=0)[0]  # scipy as the reference
    np.testing.assert_allclose(soft_foreground(logits), expected, atol=1e-6)
    # huge logits stay finite and saturate
    big = np.zeros((3, 1, 2))
    big[0, 0, 0], big[2, 0, 1] = 1000, 1000
    np.testing.assert_allclose(soft_foreground(big), [[0, 1]], atol=1e-6)
    np.testing.assert_allclose(soft_foreground(logits, background_index=3),
                               1 - softmax(logits, axis=0)[3], atol=1e-6)
    with pytest.raises(ValueError, match='C >= 2'):
        soft_foreground(np.zeros((1, 4, 4)))


def test_cutouts():
    img = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)
    alpha = np.zeros((4, 6))
    alpha[1:3, 2:5] = 1.0
    alpha[0, 0] = 0.5
    rgba = rgba_cutout(img, alpha)
    assert rgba.shape == (4, 6, 4)
    np.testing.assert_array_equal(rgba[..., :3], img)
    assert rgba[0, 0, 3] == 128 and rgba[1, 2, 3] == 255 and rgba[0, 1, 3] == 0
    cuts = person_cutouts(img, alpha, [[1.5, 0.2, 4.1, 2.9], [5, 5, 9, 9],
                                       [-3, -1, 2, 10]])
    # boxes round outwards and are clipped; the one outside is left out
    assert [box for _, box in cuts] == [(1, 0, 5, 3), (0, 0, 2, 4)]
    np.testing.assert_array_equal(cuts[0][0], rgba[0:3, 1:5])
    with pytest.raises(ValueError, match='differ in size'):
        rgba_cutout(img, alpha[:2])
