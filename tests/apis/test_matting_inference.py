"""Matting from the user's side: SapiensInferencer / DenseInferencer / CLI
outputs on exact arrays, --mask-with, video cut-outs with temporal
stabilisation, pointmap scale files, and the refusal of a matting file given
as another task (and the reverse)."""
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from mmengine.config import Config

from sapiens_mm.apis import DenseInferencer, SapiensInferencer
from sapiens_mm.apis.inference import init_model, set_input_size
from sapiens_mm.cli.infer import cli
from sapiens_mm.utils.matting import alpha_to_png, composite, matting_cutout
from sapiens_mm.visualization import matting_key
from sapiens_mm.zoo import safe_checkpoint_loading

ROOT = Path(__file__).resolve().parents[2]
MATTING = ROOT / ('configs/sapiens2/matting/'
                  'sapiens2_tiny_matting_gss_p3m_metasim-256x192.py')
NORMAL = ROOT / ('configs/sapiens2/normal/'
                 'sapiens2_tiny-normal_folder-256x192.py')
POINTMAP = ROOT / ('configs/sapiens2/pointmap/'
                   'sapiens2_tiny-pointmap_folder-256x192.py')
SIZE = (64, 48)


@pytest.fixture(scope='module')
def matting_ckpt(tmp_path_factory):
    """A tiny matting model at 64x48 whose alpha is mostly exactly 0 or 1
    (large logits), with soft values where they change sign."""
    torch.manual_seed(0)
    cfg = set_input_size(Config.fromfile(str(MATTING)), SIZE)
    model = init_model(cfg)
    with torch.no_grad():
        model.decode_head.conv_matting.weight.normal_(0, 1.0)
        model.decode_head.conv_matting.weight[3] *= 400.0
    path = tmp_path_factory.mktemp('matting') / 'matting.pth'
    torch.save(dict(state_dict=model.state_dict()), path)
    return cfg, str(path)


def _image(h=70, w=50, seed=1):
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), np.uint8)


def test_sapiens_inferencer_matting_files(matting_ckpt, tmp_path):
    cfg, ckpt = matting_ckpt
    inferencer = SapiensInferencer({'matting': (cfg, ckpt)}, device='cpu')
    img = _image()
    cv2.imwrite(str(tmp_path / 'photo.png'), img)
    [res] = inferencer(str(tmp_path / 'photo.png'), out_dir=str(tmp_path),
                       background='white', alpha_bits=16,
                       show_progress=False)
    matte = res['predictions']['matting']
    assert matte.shape == (70, 50, 4) and matte.dtype == np.float32
    alpha = matte[..., 3]
    assert 0 <= alpha.min() and alpha.max() <= 1
    assert (alpha == 0).any() and (alpha == 1).any()
    files = res['pred_files']
    assert np.array_equal(np.load(files['matting']), matte)
    stored = cv2.imread(files['matting_alpha'], cv2.IMREAD_UNCHANGED)
    assert stored.dtype == np.uint16
    assert np.array_equal(stored, alpha_to_png(alpha, 16))
    rgba = cv2.imread(files['matting_rgba'], cv2.IMREAD_UNCHANGED)
    assert np.array_equal(rgba, matting_cutout(matte[..., :3], alpha))
    vis = cv2.imread(res['vis_files']['matting'])
    # the composite, its key on the right (alpha 1 to 0 over the
    # background) and the caption below
    assert np.array_equal(vis[:70, :50], composite(matte[..., :3], alpha,
                                                   (255, 255, 255)))
    np.testing.assert_array_equal(
        vis[:70, 50:], matting_key(70, (255, 255, 255), 50))
    assert vis.shape[0] > 70
    # the same matte as the eager estimator's own post-processing
    dense = DenseInferencer(cfg, ckpt, device='cpu', show_progress=False)
    out = dense(str(tmp_path / 'photo.png'), background=(0, 0, 255),
                return_vis=True, pred_out_dir=str(tmp_path / 'dense'),
                alpha_bits=8)
    assert np.array_equal(out['predictions'][0], matte)
    assert np.array_equal(out['visualization'][0][:70, :50],
                          composite(matte[..., :3], alpha, (0, 0, 255)))
    alpha8 = cv2.imread(str(tmp_path / 'dense/photo_alpha.png'),
                        cv2.IMREAD_UNCHANGED)
    assert np.array_equal(alpha8, alpha_to_png(alpha, 8))
    assert np.array_equal(
        cv2.imread(str(tmp_path / 'dense/photo_rgba.png'),
                   cv2.IMREAD_UNCHANGED), rgba)


def test_mask_with_matting_masks_normals(matting_ckpt):
    """Normals are NaN where alpha < 0.5 and untouched elsewhere; their
    visualisation is exactly black where alpha is 0 and exactly the unmasked
    one where alpha is 1."""
    cfg, ckpt = matting_ckpt
    normal_cfg = set_input_size(Config.fromfile(str(NORMAL)), SIZE)
    torch.manual_seed(1)
    normal_model = init_model(normal_cfg)
    state = {'state_dict': normal_model.state_dict()}
    img = _image(seed=2)
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / 'normal.pth')
        torch.save(state, path)
        plain = SapiensInferencer({'normal': (normal_cfg, path)},
                                  device='cpu')
        masked = SapiensInferencer({'normal': (normal_cfg, path),
                                    'matting': (cfg, ckpt)},
                                   device='cpu', mask_with='matting')
        [ref] = plain(img, return_vis=True, show_progress=False)
        [out] = masked(img, return_vis=True, show_progress=False)
    alpha = out['predictions']['matting'][..., 3]
    inside, outside = alpha >= 0.5, alpha < 0.5
    assert inside.any() and outside.any()
    n_ref, n_out = ref['predictions']['normal'], out['predictions']['normal']
    assert np.isnan(n_out[outside]).all()
    assert np.array_equal(n_out[inside], n_ref[inside])
    v_ref, v_out = ref['visualization']['normal'], out['visualization'][
        'normal']
    # the picture (the orientation key beside it is drawn the same)
    h, w = alpha.shape
    assert np.array_equal(v_out[:, w:], v_ref[:, w:])
    v_ref, v_out = v_ref[:h, :w], v_out[:h, :w]
    assert (v_out[alpha == 0] == 0).all()
    assert np.array_equal(v_out[alpha == 1], v_ref[alpha == 1])
    with pytest.raises(ValueError, match='needs a seg model'):
        SapiensInferencer({'matting': (cfg, ckpt)}, device='cpu',
                          mask_with='seg')


def _video(path, frames=3, size=(64, 48)):
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*'mp4v'), 10,
                             (size[1], size[0]))
    rng = np.random.default_rng(3)
    base = rng.integers(0, 256, (size[0], size[1], 3), np.uint8)
    for i in range(frames):
        writer.write(np.roll(base, i, axis=1))
    writer.release()


def test_video_cutout_and_pointmap_scale(matting_ckpt, tmp_path):
    cfg, ckpt = matting_ckpt
    video = tmp_path / 'clip.mp4'
    _video(video)
    raw = SapiensInferencer({'matting': (cfg, ckpt)}, device='cpu')
    steady = SapiensInferencer({'matting': (cfg, ckpt)}, device='cpu',
                               stabilize_matting=True)
    a = [r['predictions']['matting'][..., 3] for r in raw(
        str(video), show_progress=False)]
    out = steady(str(video), out_dir=str(tmp_path / 'out'),
                 show_progress=False)
    b = [r['predictions']['matting'][..., 3] for r in out]
    assert len(a) == len(b) == 3
    assert np.array_equal(a[0], b[0])  # the first frame is kept
    assert np.abs(np.diff(b, axis=0)).mean() < np.abs(np.diff(a, axis=0)
                                                      ).mean()
    assert (tmp_path / 'out/matting/clip.mp4').is_file()
    rgba = cv2.imread(out[2]['pred_files']['matting_rgba'],
                      cv2.IMREAD_UNCHANGED)
    assert rgba.shape == (64, 48, 4)
    assert out[2]['pred_files']['matting_rgba'].endswith(
        'matting/clip/000002_rgba.png')
    # pointmaps: the per-frame scale is written out
    torch.manual_seed(0)
    pcfg = Config.fromfile(str(POINTMAP))
    pmodel = init_model(pcfg)
    with torch.no_grad():
        pmodel.decode_head.scale_final_layer[-1].bias += 2.0
    pckpt = tmp_path / 'pointmap.pth'
    torch.save(dict(state_dict=pmodel.state_dict()), pckpt)
    points = SapiensInferencer({'pointmap': (pcfg, str(pckpt))},
                               device='cpu', stabilize_pointmap_scale=True)
    res = points(str(video), out_dir=str(tmp_path / 'pm'),
                 show_progress=False)
    import json
    for r in res:
        scale = json.loads(Path(r['pred_files']['pointmap_scale'])
                           .read_text())
        assert scale == r['predictions']['pointmap_scale']
        assert scale['measured'] > 0 and scale['applied'] > 0
    assert res[0]['predictions']['pointmap_scale']['measured'] == \
        pytest.approx(res[0]['predictions']['pointmap_scale']['applied'])


def test_cli_writes_matting_and_refuses_wrong_task(matting_ckpt, tmp_path):
    cfg, ckpt = matting_ckpt
    cfg_path = tmp_path / 'matting_cfg.py'
    cfg.dump(str(cfg_path))
    img = tmp_path / 'p.png'
    cv2.imwrite(str(img), _image())
    cli([str(img), '--matting', ckpt, '--matting-config', str(cfg_path),
         '--out-dir', str(tmp_path / 'o'), '--background', '#000000',
         '--no-progress', '--device', 'cpu'])
    assert (tmp_path / 'o/matting/p_rgba.png').is_file()
    assert (tmp_path / 'o/matting/p_alpha.png').is_file()
    # an official matting file given as --seg, and a seg file as --matting
    fake = tmp_path / 'sapiens2_1b_matting.safetensors'
    fake.write_bytes(b'not read: the name tells the task')
    seg = tmp_path / 'sapiens2_0.4b_seg.safetensors'
    seg.write_bytes(b'not read either')
    for flag, path, other in (('--seg', fake, 'matting'),
                              ('--matting', seg, 'seg')):
        with pytest.raises(SystemExit) as exc:
            cli([str(img), flag, str(path), '--out-dir',
                 str(tmp_path / 'x'), '--device', 'cpu'], prog='infer')
        message = str(exc.value)
        assert '\n' not in message
        assert f"given for '{flag[2:]}' is a {other} model" in message
    with pytest.raises(SystemExit, match='not a colour'):
        cli([str(img), '--matting', ckpt, '--matting-config', str(cfg_path),
             '--out-dir', str(tmp_path / 'y'), '--background', 'nocolour',
             '--device', 'cpu'])


def test_stock_mmseg_front_ends_run_the_matting_model(tmp_path):
    """mmseg's init_model / inference_model and MMSegInferencer build and
    run the shipped matting config and return our inferencer's matte at
    the image size (their visualiser cannot draw it: docs/matting.md)."""
    from mmseg.apis import MMSegInferencer, inference_model
    from mmseg.apis import init_model as mmseg_init_model
    cfg = Config.fromfile(str(MATTING))  # stock front ends: cfg.test_pipeline
    torch.manual_seed(0)
    ckpt = str(tmp_path / 'matting.pth')
    torch.save(dict(state_dict=init_model(cfg).state_dict()), ckpt)
    img = _image()
    # the stock front ends read local files through sapiens_mm's reader
    # (which adds the matting task's dataset_meta) inside this block
    with safe_checkpoint_loading():
        model = mmseg_init_model(cfg, ckpt, device='cpu')
        again = MMSegInferencer(cfg, ckpt, device='cpu')
    sample = inference_model(model, img)
    assert tuple(sample.pred_matting.data.shape) == (4, 70, 50)
    assert torch.equal(sample.pred_alpha.data, sample.pred_matting.data[3:])
    ours = SapiensInferencer({'matting': (cfg, ckpt)}, device='cpu')
    [res] = ours(img, show_progress=False)
    # float32 both; ours runs the packed linear layers (oneDNN's GEMM,
    # another float32 summation order) and the LayerScale with the residual
    # add in one pass: the alpha (in [0, 1]) within a few float32 ulps
    # (measured: 3e-8)
    np.testing.assert_allclose(sample.pred_alpha.data[0].numpy(),
                               res['predictions']['matting'][..., 3],
                               rtol=0, atol=1e-6)
    again = again(img, return_datasamples=True)
    assert torch.equal(again.pred_alpha.data, sample.pred_alpha.data)
