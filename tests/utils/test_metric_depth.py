"""Metric depth (scale + shift fit), back-projection, normals and .ply output
on generated scenes whose camera (``cam_K``) and depth are known."""
import json
import math
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from tool_helpers import load_tool

from sapiens_mm.datasets.synthetic import load_sample, write_dataset
from sapiens_mm.utils.metric_depth import (
    apply_scale_shift,
    fit_scale_shift,
    known_points_from_csv,
    known_points_from_sparse_depth,
)
from sapiens_mm.utils.pointcloud import (
    backproject,
    intrinsics_from_fov,
    normals_from_depth,
    write_ply,
)

SCALE, SHIFT = 2.5, 1.3  # metres = SCALE * relative + SHIFT


@pytest.fixture(scope='module')
def scene(tmp_path_factory):
    """One generated image: image, depth (metres, 0 = background), normals
    and the camera intrinsics the writer stored as ``cam_K``."""
    root = tmp_path_factory.mktemp('synthetic')
    write_dataset(root, num_train=1, num_val=0, seed=3, size=(160, 120),
                  max_people=3, progress=False)
    ann = json.loads((root / 'train/annotations/goliath_308.json').read_text())
    sample = load_sample(root, 'train', '000000')
    sample['K'] = np.asarray(ann['images'][0]['cam_K'], np.float64)
    sample['fg'] = sample['depth'] > 0
    assert sample['fg'].sum() > 500  # enough of a person to measure on
    return sample


def _relative(depth: np.ndarray) -> np.ndarray:
    """A relative depth map: the metric one through an unknown affine map,
    NaN on the background (as the inferencer writes it)."""
    return np.where(depth > 0, (depth - SHIFT) / SCALE, np.nan)


def test_fit_exact_without_noise(scene):
    rel = _relative(scene['depth'])
    fit = fit_scale_shift(*known_points_from_sparse_depth(
        np.where(scene['fg'], scene['depth'], 0), rel))
    # float64 least squares on float32 depths: exact to ~1e-6 relative
    assert fit.scale == pytest.approx(SCALE, rel=1e-5)
    assert fit.shift == pytest.approx(SHIFT, rel=1e-5)
    assert fit.rmse_m < 1e-5
    metric = apply_scale_shift(rel, fit)
    np.testing.assert_allclose(metric[scene['fg']],
                               scene['depth'][scene['fg']], rtol=1e-5)
    assert np.isnan(metric[~scene['fg']]).all()


@pytest.mark.parametrize('inverse', [False, True])
def test_fit_sparse_noisy_within_one_percent(scene, inverse):
    """A sparse depth sensor: every 5th foreground pixel, 1 cm noise."""
    rng = np.random.default_rng(0)
    depth = scene['depth'].astype(np.float64)
    if inverse:  # the model predicts inverse depth: 1 / m = s * rel + t
        s, t = 0.3, 0.4
        rel = np.where(depth > 0, (1 / np.where(depth > 0, depth, 1) - t) / s,
                       np.nan)
    else:
        s, t = SCALE, SHIFT
        rel = _relative(depth)
    sparse = np.zeros_like(depth)
    idx = np.flatnonzero(scene['fg'])[::5]
    sigma = 0.01
    sparse.flat[idx] = depth.flat[idx] + rng.normal(0, sigma, idx.size)
    fit = fit_scale_shift(*known_points_from_sparse_depth(sparse, rel),
                          inverse=inverse)
    # With >= 100 points over a depth range of decimetres the standard error
    # of scale and shift is a fraction of a percent: 1 % (the bound)
    # is several standard errors.
    assert fit.num_points == idx.size >= 100
    assert fit.scale == pytest.approx(s, rel=0.01)
    assert fit.shift == pytest.approx(t, rel=0.01)
    assert fit.inverse is inverse
    # the reported residual is the sensor noise (RMS of N(0, 1 cm) samples)
    assert fit.rmse_m == pytest.approx(sigma, rel=0.2)
    assert fit.max_abs_m > fit.rmse_m


def test_fit_refuses_with_reason():
    with pytest.raises(ValueError, match='2 usable known point.*at least 3'):
        fit_scale_shift([0.1, 0.2], [1.0, 2.0])
    with pytest.raises(ValueError, match='1 of 3 dropped.*outside the person'):
        fit_scale_shift([0.1, np.nan, 0.3], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match='same.*undetermined'):
        fit_scale_shift([0.5, 0.5, 0.5, 0.5], [1.0, 2.0, 3.0, 4.0])
    # inverse depth fitted as depth: depth falls as the map rises
    with pytest.raises(ValueError, match='not positive.*--inverse'):
        fit_scale_shift([1.0, 0.5, 0.25], [1.0, 2.0, 4.0])
    fit = fit_scale_shift([1.0, 0.5, 0.25], [1.0, 2.0, 4.0], inverse=True)
    assert (fit.scale, fit.shift) == pytest.approx((1.0, 0.0), abs=1e-12)
    with pytest.raises(ValueError, match='3 relative values but 2'):
        fit_scale_shift([1, 2, 3], [1, 2])


def test_known_points_csv(tmp_path):
    rel = np.arange(20, dtype=np.float64).reshape(4, 5)  # rel[y, x] = 5y + x
    p = tmp_path / 'k.csv'
    p.write_text('x,y,metres\n# a comment\n1,2,3.5\n\n4.4, 0.6 ,7\n')
    x, d = known_points_from_csv(p, rel)
    np.testing.assert_array_equal(x, [11.0, 9.0])  # (1, 2) and (4, 1)
    np.testing.assert_array_equal(d, [3.5, 7.0])
    p.write_text('1,2,3\n1,2,x\n')
    with pytest.raises(ValueError, match='line 2: expected numbers'):
        known_points_from_csv(p, rel)
    p.write_text('1,2\n')
    with pytest.raises(ValueError, match='line 1: expected three'):
        known_points_from_csv(p, rel)
    p.write_text('5,0,1\n')
    with pytest.raises(ValueError, match=r'outside the 5x4 .*\[0, 4\]'):
        known_points_from_csv(p, rel)


def test_backprojection_exact(scene):
    K, depth, fg = scene['K'], scene['depth'], scene['fg']
    pts = backproject(depth, K)
    h, w = depth.shape
    v, u = np.mgrid[0:h, 0:w]
    # projecting the points again gives the pixel centres and the depth
    proj_u = K[0, 0] * pts[..., 0] / pts[..., 2] + K[0, 2]
    proj_v = K[1, 1] * pts[..., 1] / pts[..., 2] + K[1, 2]
    np.testing.assert_allclose(proj_u[fg], u[fg], rtol=0, atol=1e-9)
    np.testing.assert_allclose(proj_v[fg], v[fg], rtol=0, atol=1e-9)
    np.testing.assert_array_equal(pts[..., 2][fg], depth[fg])
    assert np.isnan(pts[~fg]).all()
    # the field of view of cam_K gives back cam_K (square pixels, centred)
    fov_y = math.degrees(2 * math.atan(h / 2 / K[1, 1]))
    np.testing.assert_allclose(intrinsics_from_fov(fov_y, w, h, 'y'), K,
                               rtol=1e-12, atol=1e-9)
    fov_x = math.degrees(2 * math.atan(w / 2 / K[0, 0]))
    np.testing.assert_allclose(intrinsics_from_fov(fov_x, w, h), K,
                               rtol=1e-12, atol=1e-9)


def test_normals_from_depth_match_analytic(scene):
    """Normals derived from the z-buffer against the generator's analytic
    normals of the same smooth surfaces."""
    est = normals_from_depth(scene['depth'], scene['K'])
    ok = np.isfinite(est).all(-1)
    assert ok.sum() > 0.5 * scene['fg'].sum()
    assert not ok[~scene['fg']].any()
    cos = np.clip((est[ok] * scene['normal'][ok]).sum(-1), -1, 1)
    angle = np.degrees(np.arccos(cos))
    np.testing.assert_allclose(np.linalg.norm(est[ok], axis=-1), 1, atol=1e-5)
    # Central differences on a 160x120 render of ellipsoids and cones
    # (measured: median 0.44 deg, 90th percentile 4.5 deg): the error is the
    # discretisation of curved surfaces, seams between primitives add a
    # tail. The bounds leave 4x / 2x room; a wrong sign or axis swap gives
    # tens of degrees.
    assert np.median(angle) < 2.0, np.median(angle)
    assert np.percentile(angle, 90) < 10.0, np.percentile(angle, 90)
    assert (est[ok][:, 2] < 0).mean() > 0.99  # towards the camera


def _read_ply(path: Path):
    """A minimal independent PLY reader (vertex element only)."""
    raw = path.read_bytes()
    end = raw.index(b'end_header\n') + len(b'end_header\n')
    header = raw[:end].decode('ascii').splitlines()
    n = int(next(h for h in header if h.startswith('element vertex')).split()
            [-1])
    props = [h.split()[1:] for h in header if h.startswith('property')]
    types = {'float': '<f4', 'uchar': 'u1'}
    dtype = np.dtype([(name, types[t]) for t, name in props])
    if 'format ascii 1.0' in header:
        table = np.loadtxt(raw[end:].decode('ascii').splitlines(), ndmin=2)
        out = np.empty(n, dtype)
        for j, name in enumerate(dtype.names):
            out[name] = table[:, j]
        return out
    assert 'format binary_little_endian 1.0' in header
    assert len(raw) - end == n * dtype.itemsize
    return np.frombuffer(raw[end:], dtype)


@pytest.mark.parametrize('ascii', [False, True])
def test_ply_round_trip(scene, tmp_path, ascii):
    pts = backproject(scene['depth'], scene['K'])
    nrm = normals_from_depth(scene['depth'], scene['K'])
    n = write_ply(tmp_path / 'a.ply', pts, scene['image'], ascii=ascii)
    v = _read_ply(tmp_path / 'a.ply')
    fg = scene['fg']
    assert n == len(v) == fg.sum()
    for j, c in enumerate('xyz'):
        np.testing.assert_array_equal(v[c], pts[..., j][fg].astype(np.float32))
    for j, c in enumerate(('red', 'green', 'blue')):
        np.testing.assert_array_equal(v[c], scene['image'][..., j][fg])
    # with normals, points without a normal are dropped
    n = write_ply(tmp_path / 'b.ply', pts, normals=nrm, ascii=ascii)
    v = _read_ply(tmp_path / 'b.ply')
    ok = np.isfinite(nrm).all(-1)
    assert n == len(v) == ok.sum()
    np.testing.assert_array_equal(v['nz'], nrm[..., 2][ok])
    with pytest.raises(ValueError, match='colors'):
        write_ply(tmp_path / 'c.ply', pts, scene['image'][:10])


def test_depth_to_metric_tool(scene, tmp_path, capsys):
    rel = _relative(scene['depth']).astype(np.float32)
    np.save(tmp_path / 'rel.npy', rel)
    Image.fromarray(scene['image']).save(tmp_path / 'img.png')
    ys, xs = np.nonzero(scene['fg'])
    pick = np.linspace(0, len(xs) - 1, 12).astype(int)
    rows = ['x,y,metres'] + [f'{xs[i]},{ys[i]},{scene["depth"][ys[i], xs[i]]}'
                             for i in pick]
    (tmp_path / 'k.csv').write_text('\n'.join(rows) + '\n')
    h, w = rel.shape
    fov = math.degrees(2 * math.atan(w / 2 / scene['K'][0, 0]))
    argv = [str(tmp_path / 'rel.npy'), '--points', str(tmp_path / 'k.csv'),
            '--out', str(tmp_path / 'm'), '--fov', f'{fov!r}', '--image',
            str(tmp_path / 'img.png'), '--normals']
    tool = load_tool('depth_to_metric')
    assert tool.main(argv) == 0
    assert 'from 12 points: residual RMS' in capsys.readouterr().out
    fit = json.loads((tmp_path / 'm_fit.json').read_text())
    assert fit['scale'] == pytest.approx(SCALE, rel=1e-5)
    assert fit['shift'] == pytest.approx(SHIFT, rel=1e-5)
    metric = np.load(tmp_path / 'm.npy')
    np.testing.assert_allclose(metric[scene['fg']],
                               scene['depth'][scene['fg']], rtol=1e-5)
    v = _read_ply(tmp_path / 'm.ply')
    ok = np.isfinite(normals_from_depth(metric, scene['K'])).all(-1)
    assert fit['ply_points'] == len(v) == ok.sum()
    # colours are the image's RGB, in row-major pixel order
    np.testing.assert_array_equal(v['red'], scene['image'][..., 0][ok])
    np.testing.assert_array_equal(v['blue'], scene['image'][..., 2][ok])
    assert {'nx', 'ny', 'nz'} <= set(v.dtype.names)
    # too few points: one line on stderr, exit 2, no traceback
    (tmp_path / 'k2.csv').write_text('\n'.join(rows[:3]) + '\n')
    argv[2] = str(tmp_path / 'k2.csv')
    with pytest.raises(SystemExit) as exit_:
        tool.run_cli(tool.main, argv, 'tools/depth_to_metric.py')
    msg = str(exit_.value.code)  # a message: Python prints it, exit code 1
    assert msg.startswith('tools/depth_to_metric.py: error: Cannot fit scale '
                          'and shift: 2 usable')
    assert '\n' not in msg


def test_depth_to_metric_tool_sparse_png_and_image_limits(scene, tmp_path):
    """A 16-bit sparse depth PNG (millimetres) fits like the same depths
    given as points; an --image whose header declares more pixels than the
    image limit is refused in one line before it is decoded, and nothing is
    written past the fit."""
    from attack_helpers import tiff_two_sizes
    rel = _relative(scene['depth']).astype(np.float32)
    np.save(tmp_path / 'rel.npy', rel)
    sparse = np.zeros(rel.shape, np.uint16)
    ys, xs = np.nonzero(scene['fg'])
    pick = np.linspace(0, len(xs) - 1, 12).astype(int)
    sparse[ys[pick], xs[pick]] = np.round(
        scene['depth'][ys[pick], xs[pick]] * 1000).astype(np.uint16)
    Image.fromarray(sparse).save(tmp_path / 'sparse.png')
    tool = load_tool('depth_to_metric')
    argv = [str(tmp_path / 'rel.npy'), '--sparse-depth',
            str(tmp_path / 'sparse.png'), '--png-scale', '1000', '--out',
            str(tmp_path / 'm')]
    assert tool.main(argv) == 0
    fit = json.loads((tmp_path / 'm_fit.json').read_text())
    # depths rounded to 1 mm on a 1-8 m scene: the fit within 0.1 %
    assert fit['scale'] == pytest.approx(SCALE, rel=1e-3)
    assert fit['shift'] == pytest.approx(SHIFT, rel=1e-3)
    # an image whose size tags say 30000 x 30000 (900 MP > the 50 MP limit)
    big = tiff_two_sizes(tmp_path / 'big.tif', 30000, 30000)
    with pytest.raises(SystemExit) as exit_:
        tool.run_cli(tool.main, argv + ['--fov', '60', '--image', big,
                                        '--out', str(tmp_path / 'm2')],
                     'tools/depth_to_metric.py')
    msg = str(exit_.value.code)
    assert msg.startswith('tools/depth_to_metric.py: error: Cannot read the '
                          f'image {big}') and 'pixels' in msg, msg
    assert '\n' not in msg
    assert not (tmp_path / 'm2.ply').exists()
