"""The batched UDP heatmap decoder against mmpose's own ``UDPHeatmap``.

mmpose's per-person decoder is the independent reference: every test
decodes the same heatmaps with both and compares. Tolerance 1e-3 px (in
input pixels, the issue's bar); both compute in float32 with the same
operations, so the differences are float rounding: up to 4e-5 px on 64x48
heatmaps, 1e-4 px on the wider peaks of 256x192 ones.
"""
import numpy as np
import pytest
import torch
from mmpose.codecs import MSRAHeatmap, UDPHeatmap
from tool_helpers import load_tool

from sapiens_mm.codecs import (
    BatchUDPHeatmap,
    as_batch_decoder,
    batch_decode,
    decode_udp_heatmaps,
)

#: The tiny configs' codec (256x192 crops, 64x48 heatmaps) and the released
#: models' (1024x768 crops, 256x192 heatmaps).
SMALL = dict(input_size=(192, 256), heatmap_size=(48, 64), sigma=2)
LARGE = dict(input_size=(768, 1024), heatmap_size=(192, 256), sigma=6)
TOL_PX = 1e-3


def clear_heatmaps(codec: UDPHeatmap, n: int, k: int,
                   rng: np.random.Generator) -> np.ndarray:
    """Ideal Gaussian peaks: mmpose's encoder on random keypoints (some near
    the borders, where the edge padding matters)."""
    w, h = codec.input_size
    out = []
    for _ in range(n):
        kpts = rng.uniform([0, 0], [w - 1, h - 1], (1, k, 2))
        kpts[0, :3] = [[0.3, 0.2], [w - 1.4, 5.], [w / 2, h - 1.1]]
        out.append(codec.encode(kpts.astype(np.float32))['heatmaps'])
    return np.stack(out).astype(np.float32)


def noisy_heatmaps(codec: UDPHeatmap, n: int, k: int,
                   rng: np.random.Generator) -> np.ndarray:
    """Heatmaps as a trained network gives them: peaks of random height
    (0.05 - 1, low for unsure keypoints), a negative bias and noise, and
    some keypoints with no peak at all (the map is negative everywhere, the
    case where mmpose puts the keypoint at (-1, -1))."""
    hm = clear_heatmaps(codec, n, k, rng)
    hm *= rng.uniform(0.05, 1.0, (n, k, 1, 1)).astype(np.float32)
    hm += rng.normal(-0.01, 0.01, hm.shape).astype(np.float32)
    absent = rng.random((n, k)) < 0.05
    absent[0, 0] = absent[-1, -1] = True  # first and last map: wrap-around
    hm[absent] = -np.abs(hm[absent]) - 0.02
    return hm


def mmpose_decode(codec: UDPHeatmap, heatmaps: np.ndarray):
    decoded = [codec.decode(hm) for hm in heatmaps]
    return (np.concatenate([d[0] for d in decoded]),
            np.concatenate([d[1] for d in decoded]))


@pytest.mark.parametrize('kind', ['clear', 'noisy'])
@pytest.mark.parametrize('k', [17, 133, 308])
def test_numpy_and_torch_equal_mmpose(kind, k):
    rng = np.random.default_rng(k)
    codec = UDPHeatmap(**SMALL)
    make = clear_heatmaps if kind == 'clear' else noisy_heatmaps
    hm = make(codec, 3, k, rng)
    ref_kpts, ref_scores = mmpose_decode(codec, hm)
    if kind == 'noisy':
        assert (ref_kpts < 0).any()  # the (-1, -1) case is exercised
    kpts, scores = decode_udp_heatmaps(hm, codec.input_size)
    assert kpts.shape == (3, k, 2) and scores.shape == (3, k)
    np.testing.assert_allclose(kpts, ref_kpts, rtol=0, atol=TOL_PX)
    np.testing.assert_array_equal(scores, ref_scores)
    t_kpts, t_scores = decode_udp_heatmaps(torch.from_numpy(hm),
                                           codec.input_size)
    assert isinstance(t_kpts, torch.Tensor)
    np.testing.assert_allclose(t_kpts.numpy(), ref_kpts, rtol=0,
                               atol=TOL_PX)
    np.testing.assert_array_equal(t_scores.numpy(), ref_scores)


@pytest.mark.parametrize('kind', ['clear', 'noisy'])
def test_released_heatmap_size_equals_mmpose(kind):
    """256x192 heatmaps (sigma 6), the released 1024x768 models' size."""
    rng = np.random.default_rng(1)
    codec = UDPHeatmap(**LARGE)
    make = clear_heatmaps if kind == 'clear' else noisy_heatmaps
    hm = make(codec, 2, 17, rng)
    ref_kpts, _ = mmpose_decode(codec, hm)
    for heatmaps in (hm, torch.from_numpy(hm)):
        kpts, _ = decode_udp_heatmaps(heatmaps, codec.input_size)
        np.testing.assert_allclose(np.asarray(kpts), ref_kpts, rtol=0,
                                   atol=TOL_PX)


def test_other_blur_kernel_equals_mmpose():
    rng = np.random.default_rng(2)
    codec = UDPHeatmap(**SMALL, blur_kernel_size=17)
    hm = noisy_heatmaps(codec, 2, 17, rng)
    ref_kpts, _ = mmpose_decode(codec, hm)
    kpts, _ = decode_udp_heatmaps(hm, codec.input_size, 17)
    np.testing.assert_allclose(kpts, ref_kpts, rtol=0, atol=TOL_PX)


def test_bad_inputs_raise():
    with pytest.raises(ValueError, match='odd integer'):
        decode_udp_heatmaps(np.zeros((1, 2, 8, 8), np.float32), (32, 32), 4)
    with pytest.raises(ValueError, match=r'\(N, K, H, W\)'):
        decode_udp_heatmaps(np.zeros((2, 8, 8), np.float32), (32, 32))
    codec = BatchUDPHeatmap(**SMALL)
    with pytest.raises(ValueError, match='heatmap_size'):
        codec.batch_decode(torch.zeros(1, 17, 32, 24))


def test_empty_batch():
    kpts, scores = decode_udp_heatmaps(np.zeros((0, 17, 64, 48), np.float32),
                                       (192, 256))
    assert kpts.shape == (0, 17, 2) and scores.shape == (0, 17)


def test_codec_conversion_and_fallback():
    udp = UDPHeatmap(**SMALL)
    fast = as_batch_decoder(udp)
    assert isinstance(fast, BatchUDPHeatmap) and fast.support_batch_decoding
    assert not udp.support_batch_decoding
    msra = MSRAHeatmap(input_size=(192, 256), heatmap_size=(48, 64), sigma=2)
    assert as_batch_decoder(msra) is msra
    rng = np.random.default_rng(3)
    hm = clear_heatmaps(udp, 2, 17, rng)
    # A codec without batch decoding: one person at a time, upstream's.
    kpts, scores = batch_decode(msra, torch.from_numpy(hm))
    ref = [msra.decode(h) for h in hm]
    for got, want in zip(kpts, ref):
        np.testing.assert_array_equal(got, want[0])
    kpts, scores = batch_decode(udp, hm)
    ref_kpts, _ = mmpose_decode(udp, hm)
    assert kpts[0].shape == (1, 17, 2) and scores[0].shape == (1, 17)
    np.testing.assert_allclose(np.concatenate(kpts), ref_kpts, rtol=0,
                               atol=TOL_PX)


def test_head_decodes_batched_like_upstream():
    """A pose head with the batched codec predicts what the same head with
    mmpose's UDPHeatmap predicts (mmpose calls batch_decode on the head's
    output tensor)."""
    from mmpose.registry import MODELS
    codec = dict(input_size=(96, 128), heatmap_size=(24, 32), sigma=2)
    head_cfg = dict(type='SapiensHeatmapHead', in_channels=8, out_channels=17,
                    deconv_out_channels=(8, ), deconv_kernel_sizes=(4, ),
                    conv_out_channels=(8, ), conv_kernel_sizes=(1, ))
    from mmengine.registry import DefaultScope
    # mmpose's scope, whatever default scope an earlier test set
    with DefaultScope.overwrite_default_scope('mmpose'):
        ref_head = MODELS.build(
            dict(head_cfg, decoder=dict(type='UDPHeatmap', **codec)))
        fast_head = MODELS.build(
            dict(head_cfg, decoder=dict(type='BatchUDPHeatmap', **codec)))
    fast_head.load_state_dict(ref_head.state_dict())
    feats = (torch.randn(3, 8, 16, 12), )
    with torch.no_grad():
        ref = ref_head.predict(feats, None, test_cfg={})
        got = fast_head.predict(feats, None, test_cfg={})
    for r, g in zip(ref, got):
        np.testing.assert_allclose(g.keypoints, r.keypoints, rtol=0,
                                   atol=TOL_PX)
        np.testing.assert_array_equal(g.keypoint_scores, r.keypoint_scores)


def test_benchmark_decode_cli():
    """``benchmark.py --decode`` times both decoders on the same heatmaps
    and reports how far apart their keypoints are."""
    main = load_tool('analysis/benchmark').main
    lines = []  # the report (the tool prints it by default)
    out = main(['--decode', '--decode-sizes', '16x12', '--decode-people',
                '2', '--repeats', '1', '--warmup', '0', '--device', 'cpu'],
               echo=lines.append)
    rows = out['decode']
    assert [r['num_keypoints'] for r in rows] == [17, 133, 308]
    for r in rows:
        assert set(r['ms_per_person']) == {'mmpose', 'numpy', 'torch-cpu'}
        assert all(v > 0 for v in r['ms_per_person'].values())
        assert max(r['max_abs_diff_px'].values()) < TOL_PX
    assert 'speed-up' in '\n'.join(lines)
    with pytest.raises(SystemExit, match='HxW'):
        main(['--decode', '--decode-sizes', '16by12'])
