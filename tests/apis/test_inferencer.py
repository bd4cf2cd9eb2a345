"""SapiensInferencer end to end: outputs, files, batching, video, pose
coordinate mapping, unreadable inputs, a real photograph and the CLI.

Tiny Sapiens configs with random weights; most tests shrink them further to
a 64x48 input so that the whole file runs in seconds on two CPU cores.
"""
import json
import os
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmpose.codecs import UDPHeatmap

from sapiens_mm.apis import SapiensInferencer
from sapiens_mm.cli.infer import build_parser, main
from inference_helpers import (count_frames, image, peaked_heatmaps, small_cfg,
                               write_video)
from tiny_configs import TINY



@pytest.fixture(scope='module', autouse=True)
def one_thread():
    """One thread: much faster than two on a shared, busy 2-core machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope='module')
def inferencer():
    torch.manual_seed(0)
    return SapiensInferencer(
        models={t: small_cfg(t) for t in ('pose', 'seg', 'depth', 'normal')},
        device='cpu', detector='none')


def test_outputs_and_files(inferencer, tmp_path):
    img = image(70, 50, 0)
    cv2.imwrite(str(tmp_path / 'person.png'), img)
    (res, ) = inferencer(str(tmp_path / 'person.png'),
                         out_dir=str(tmp_path / 'out'), return_vis=True)
    h, w = 70, 50
    assert res['name'] == 'person' and res['frame_index'] is None
    assert res['img_shape'] == (h, w)
    pred = res['predictions']
    assert set(pred) == {'pose', 'seg', 'depth', 'normal'}
    seg = pred['seg']
    assert seg.shape == (h, w) and seg.dtype == np.uint8 and seg.max() < 28
    fg = seg > 0
    assert 0 < fg.sum() < h * w  # random weights: some of each
    depth, normal = pred['depth'], pred['normal']
    assert depth.shape == (h, w) and depth.dtype == np.float32
    # masked by the person foreground of the segmentation
    assert np.isfinite(depth[fg]).all() and np.isnan(depth[~fg]).all()
    assert normal.shape == (h, w, 3) and normal.dtype == np.float32
    assert np.isnan(normal[~fg]).all()
    np.testing.assert_allclose(np.linalg.norm(normal[fg], axis=-1), 1,
                               atol=1e-4)
    pose = pred['pose']
    assert pose['skeleton'] == 'goliath' and pose['bbox_source'] == \
        'whole_image'
    np.testing.assert_array_equal(pose['bboxes'], [[0, 0, w, h]])
    assert pose['keypoints'].shape == (1, 308, 2)
    assert pose['keypoint_scores'].shape == (1, 308)
    assert np.isfinite(pose['keypoints']).all()

    out = tmp_path / 'out'
    files = res['pred_files']
    assert files == {
        'pose': str(out / 'pose/person.json'),
        'seg': str(out / 'seg/person.npy'),
        'depth': str(out / 'depth/person.npy'),
        'normal': str(out / 'normal/person.npy'),
    }
    np.testing.assert_array_equal(np.load(files['seg']), seg)
    np.testing.assert_array_equal(np.load(files['depth']), depth)
    np.testing.assert_array_equal(np.load(files['normal']), normal)
    record = json.loads(Path(files['pose']).read_text())
    assert record['skeleton'] == 'goliath' and record['num_keypoints'] == 308
    assert (record['height'], record['width']) == (h, w)
    assert len(record['keypoint_names']) == 308
    (inst, ) = record['instances']
    assert inst['bbox'] == [0, 0, w, h]  # x1, y1, x2, y2 of the image
    assert record['bbox_format'] == 'xyxy'
    assert inst['skeleton'] == 'goliath'
    kpts = np.array(inst['keypoints']).reshape(308, 3)  # COCO x, y, score
    np.testing.assert_allclose(kpts[:, :2], pose['keypoints'][0], rtol=1e-6)
    np.testing.assert_allclose(kpts[:, 2], pose['keypoint_scores'][0],
                               rtol=1e-6)
    for task, path in res['vis_files'].items():
        assert path == str(out / task / 'person.png')
        vis = cv2.imread(path)
        np.testing.assert_array_equal(vis, res['visualization'][task])
        # the picture, then its caption below (the model's name)
        assert vis.shape[0] > h
        # seg, depth and normals have their key on the right, pose is
        # image-sized
        assert vis.shape[1] == w if task == 'pose' else vis.shape[1] > w
    # background is black in the depth / normal drawings
    assert (res['visualization']['depth'][:h, :w][~fg] == 0).all()
    assert (res['visualization']['normal'][:h, :w][~fg] == 0).all()


def test_batch_equals_one_by_one(inferencer, monkeypatch):
    """Batch 3 gives the predictions of batch 1. Structured images (blocks
    of flat colour) and well-posed heatmaps (one clear peak per keypoint
    plus 1 % of the model's own output, so the model's batched forward
    still decides the exact positions): every keypoint agrees to 1e-4 px,
    every seg pixel whose top-2 logit margin is above 1e-3 has the same
    label."""
    imgs = [image(70, 50, 1), image(40, 60, 2), image(64, 48, 3)]
    for img in imgs:  # flat blocks: piecewise constant, well-posed inputs
        img[:img.shape[0] // 2, :img.shape[1] // 2] = (200, 30, 90)
        img[img.shape[0] // 2:, img.shape[1] // 3:] = (20, 160, 240)
    boxes = [np.array([[2, 3, 30, 60, 0.9], [20, 10, 48, 66, 0.8]]), None,
             np.array([[0, 0, 20, 30]])]
    model = inferencer.models['pose']
    monkeypatch.setitem(model.test_cfg, 'output_heatmaps', True)
    monkeypatch.setitem(model.test_cfg, 'flip_test', False)
    head_forward = model.head.forward
    peaks = peaked_heatmaps()
    monkeypatch.setattr(model.head, 'forward',
                        lambda feats: peaks + 0.01 * head_forward(feats))
    one = inferencer(imgs, batch_size=1, bboxes=boxes,
                     return_datasamples=True)
    many = inferencer(imgs, batch_size=3, bboxes=boxes,
                      return_datasamples=True)
    assert len(one) == len(many) == 3
    assert [r['predictions']['pose']['bbox_source'] for r in many] == [
        'user', 'whole_image', 'user']
    assert many[0]['predictions']['pose']['keypoints'].shape == (2, 308, 2)
    np.testing.assert_allclose(many[0]['predictions']['pose']['bbox_scores'],
                               [0.9, 0.8])
    for a, b in zip(one, many):
        pa, pb = a['predictions'], b['predictions']
        logits = a['datasamples']['seg'].seg_logits.data
        top2 = logits.topk(2, dim=0).values
        clear = (top2[0] - top2[1] > 1e-3).numpy()
        assert clear.mean() > 0.95  # random weights: a few near-ties
        np.testing.assert_array_equal(pa['seg'][clear], pb['seg'][clear])
        assert (pa['seg'] == pb['seg']).mean() > 0.999
        np.testing.assert_allclose(pa['depth'], pb['depth'], atol=1e-4)
        np.testing.assert_allclose(pa['normal'], pb['normal'], atol=1e-4)
        for sa, sb in zip(a['datasamples']['pose'],
                          b['datasamples']['pose']):
            np.testing.assert_allclose(sa.pred_fields.heatmaps.numpy(),
                                       sb.pred_fields.heatmaps.numpy(),
                                       atol=1e-5)
        np.testing.assert_allclose(pa['pose']['keypoint_scores'],
                                   pb['pose']['keypoint_scores'], atol=1e-4)
        # well-posed peaks: every keypoint, 1e-4 px (float32 rounding of
        # the batched forward moves a keypoint by ~1e-6 px)
        np.testing.assert_allclose(pa['pose']['keypoints'],
                                   pb['pose']['keypoints'], atol=1e-4, rtol=0)


def test_video(inferencer, tmp_path):
    write_video(tmp_path / 'clip.mp4', 5)
    out = tmp_path / 'out'
    results = inferencer(str(tmp_path / 'clip.mp4'), out_dir=str(out),
                         batch_size=2)
    assert len(results) == 5
    assert [r['frame_index'] for r in results] == list(range(5))
    assert all(r['img_shape'] == (48, 64) for r in results)
    for task in ('pose', 'seg', 'depth', 'normal'):
        assert results[0]['vis_files'][task] == str(out / task / 'clip.mp4')
        n, fps = count_frames(out / task / 'clip.mp4')
        assert n == 5 and fps == pytest.approx(7.0, abs=0.01)
        ext = 'json' if task == 'pose' else 'npy'
        assert sorted(os.listdir(out / task / 'clip')) == [
            f'{i:06d}.{ext}' for i in range(5)
        ]
    assert results[3]['pred_files']['seg'] == str(out / 'seg/clip/000003.npy')
    # max_frames limits the frames read from a video
    assert len(inferencer(str(tmp_path / 'clip.mp4'), max_frames=2)) == 2


def test_unreadable_image_in_folder_is_skipped(inferencer, tmp_path):
    folder = tmp_path / 'imgs'
    (folder / 'sub').mkdir(parents=True)
    cv2.imwrite(str(folder / 'a.png'), image(40, 30, 4))
    cv2.imwrite(str(folder / 'sub' / 'c.jpg'), image(30, 40, 5))
    (folder / 'b.jpg').write_bytes(b'this is not a jpeg')
    (folder / 'notes.txt').write_text('not an image')
    results = inferencer(str(folder), out_dir=str(tmp_path / 'out'))
    assert [r['name'] for r in results] == ['a', 'sub/c']
    assert inferencer.skipped == [
        (str(folder / 'b.jpg'),
         'not a readable image (unknown or corrupt image header)')]
    assert (tmp_path / 'out/seg/sub/c.npy').is_file()


def test_bad_inputs(inferencer, tmp_path):
    with pytest.raises(FileNotFoundError, match='Input not found'):
        inferencer(str(tmp_path / 'missing.jpg'))
    with pytest.raises(ValueError, match='uint8'):
        inferencer(np.zeros((8, 8, 3), np.float32))
    with pytest.raises(ValueError, match='No image'):
        inferencer(str(tmp_path))
    with pytest.raises(ValueError, match='bboxes'):
        inferencer([image(20, 20, 0)] * 2, bboxes=[[[0, 0, 5, 5]]] * 3)
    # a webcam that does not exist gives a clear error (real webcams cannot
    # be tested here)
    with pytest.raises(RuntimeError, match='webcam 97'):
        inferencer('webcam:97')


def _box_mapping(box, input_wh=(48, 64), padding=1.25):
    """(center, scale) of mmpose's GetBBoxCenterScale + TopdownAffine."""
    x1, y1, x2, y2 = box
    center = np.array([(x1 + x2) / 2, (y1 + y2) / 2])
    w, h = (x2 - x1) * padding, (y2 - y1) * padding
    aspect = input_wh[0] / input_wh[1]
    scale = np.array([w, w / aspect] if w > h * aspect else [h * aspect, h])
    return center, scale


def test_keypoints_map_back_exactly(inferencer, monkeypatch):
    """A heatmap peak at (px, py) of a box's crop lands at
    center + (p / (heatmap_size - 1) - 1/2) * scale in the image."""
    model = inferencer.models['pose']
    hm_w, hm_h = 12, 16
    px, py = 7, 4

    def fake_head(feats):
        n = feats[-1].shape[0]
        ys, xs = np.mgrid[0:hm_h, 0:hm_w]
        hm = np.exp(-((xs - px)**2 + (ys - py)**2) / (2 * 1.5**2))
        return torch.from_numpy(hm).float().expand(n, 308, hm_h, hm_w)

    monkeypatch.setattr(model.head, 'forward', fake_head)
    monkeypatch.setitem(model.test_cfg, 'flip_test', False)
    # isolate the mapping from the sub-pixel (DARK) refinement: mmpose's own
    # decoder (the inferencer's batched one refines the same way)
    d = model.head.decoder
    monkeypatch.setattr(model.head, 'decoder', UDPHeatmap(
        input_size=d.input_size, heatmap_size=d.heatmap_size, sigma=d.sigma))
    monkeypatch.setattr('mmpose.codecs.udp_heatmap.refine_keypoints_dark_udp',
                        lambda keypoints, heatmaps, blur_kernel_size: keypoints)
    boxes = np.array([[10, 20, 40, 100], [50, 5, 140, 45]], np.float32)
    (res, ) = inferencer(image(120, 160, 6), bboxes=boxes)
    kpts = res['predictions']['pose']['keypoints']
    for box, pts in zip(boxes, kpts):
        center, scale = _box_mapping(box)
        expected = center + (np.array([px / (hm_w - 1), py /
                                       (hm_h - 1)]) - 0.5) * scale
        np.testing.assert_allclose(pts, np.broadcast_to(expected, pts.shape),
                                   atol=1e-3)


def test_keypoints_follow_a_dot(inferencer, monkeypatch):
    """A head that points at the brightest pixel of its crop finds a white
    dot at its true image position, through the crop, the flip test and
    the mapping back, for several boxes."""
    model = inferencer.models['pose']
    hm_w, hm_h = 12, 16

    def fake_extract(inputs):
        return (inputs, )

    def fake_head(feats):
        x = feats[-1].sum(1)  # (N, h, w) crop brightness
        n, h, w = x.shape
        flat = x.reshape(n, -1).argmax(1)
        cy, cx = (flat // w).float(), (flat % w).float()
        # UDP: crop pixel u <-> heatmap pixel u * (W - 1) / (w - 1)
        hx, hy = cx * (hm_w - 1) / (w - 1), cy * (hm_h - 1) / (h - 1)
        ys, xs = torch.meshgrid(torch.arange(hm_h).float(),
                                torch.arange(hm_w).float(), indexing='ij')
        hm = torch.exp(-((xs - hx.view(n, 1, 1))**2 +
                         (ys - hy.view(n, 1, 1))**2) / (2 * 1.5**2))
        return hm[:, None].expand(n, 308, hm_h, hm_w)

    monkeypatch.setattr(model, 'extract_feat', fake_extract)
    monkeypatch.setattr(model.head, 'forward', fake_head)
    img = np.zeros((150, 200, 3), np.uint8)
    dots = [(37, 71), (150, 30)]
    for x, y in dots:
        cv2.circle(img, (x, y), 1, (255, 255, 255), -1)
    boxes = np.array([[20, 30, 60, 120], [120, 10, 190, 60]], np.float32)
    (res, ) = inferencer(img, bboxes=boxes)
    for (x, y), box, pts in zip(dots, boxes,
                                res['predictions']['pose']['keypoints']):
        _, scale = _box_mapping(box)
        tol = scale[0] / (48 - 1)  # one crop pixel, in image pixels
        np.testing.assert_allclose(pts[0], [x, y], atol=tol)


def test_astronaut_all_tasks_end_to_end(tmp_path):
    """A real photograph through the shipped tiny configs (256x192)."""
    from skimage import data
    path = tmp_path / 'astronaut.png'
    cv2.imwrite(str(path), data.astronaut()[..., ::-1])  # RGB -> BGR
    inferencer = SapiensInferencer(models={t: str(c)
                                           for t, c in TINY.items()},
                                   device='cpu', batch_size=2)
    (res, ) = inferencer(str(path), out_dir=str(tmp_path / 'out'))
    pred = res['predictions']
    assert res['img_shape'] == (512, 512)
    assert pred['seg'].shape == (512, 512)
    assert pred['depth'].shape == (512, 512)
    assert pred['normal'].shape == (512, 512, 3)
    assert pred['pose']['keypoints'].shape[1:] == (308, 2)
    # the built-in HOG detector either finds the astronaut or falls back
    assert pred['pose']['bbox_source'] in ('detector', 'whole_image')
    for task in ('pose', 'seg', 'depth', 'normal'):
        assert os.path.isfile(res['pred_files'][task])
        # the picture, its caption below
        assert cv2.imread(res['vis_files'][task]).shape[0] > 512


def test_bf16(inferencer):
    """bf16 autocast runs and stays close to fp32 on the dense outputs."""
    cfgs = {t: small_cfg(t) for t in ('seg', 'depth')}
    torch.manual_seed(0)
    fp32 = SapiensInferencer(cfgs, device='cpu')
    bf16 = SapiensInferencer(cfgs, device='cpu', dtype='bf16')
    bf16.models['seg'].load_state_dict(fp32.models['seg'].state_dict())
    bf16.models['depth'].load_state_dict(fp32.models['depth'].state_dict())
    img = image(64, 48, 7)
    # the backbone's matmuls run in bf16 (a hooked intermediate output),
    # the head's output is cast back to float32 for decoding
    seen = {}

    def record(name):
        def hook(module, args, out):
            seen.setdefault(name, out.dtype)  # returns None: output kept
        return hook

    for name, inf in (('fp32', fp32), ('bf16', bf16)):
        model = inf.models['depth']
        model.backbone.layers[0].attn.qkv.register_forward_hook(
            record(f'{name}_qkv'))
        model.decode_head.conv_seg.register_forward_hook(
            record(f'{name}_head'))
    a = fp32(img)[0]['predictions']
    b = bf16(img)[0]['predictions']
    assert seen['fp32_qkv'] == torch.float32
    assert seen['bf16_qkv'] == torch.bfloat16
    assert seen['fp32_head'] == seen['bf16_head'] == torch.float32
    assert b['depth'].dtype == np.float32
    fg = (a['seg'] > 0) & (b['seg'] > 0)
    assert (a['seg'] == b['seg']).mean() > 0.8
    assert np.abs(a['depth'][fg] - b['depth'][fg]).mean() < 0.1 * np.abs(
        a['depth'][fg]).mean() + 0.05
    with pytest.raises(ValueError, match='dtype'):
        SapiensInferencer(cfgs, device='cpu', dtype='int8')


def test_model_arguments(tmp_path):
    with pytest.raises(ValueError, match='No model for task'):
        SapiensInferencer({'seg': small_cfg('seg')}, tasks=('seg', 'pose'))
    with pytest.raises(ValueError, match="given for 'pose' is a seg model"):
        SapiensInferencer({'pose': small_cfg('seg')})
    with pytest.raises(FileNotFoundError, match='Checkpoint not found'):
        SapiensInferencer({'pose': str(tmp_path / 'nope.pth')})
    inf = SapiensInferencer([small_cfg('seg'), small_cfg('depth')],
                            tasks=['depth'], device='cpu')
    assert inf.tasks == ('depth', )


def test_cli(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(['--help'])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for option in ('--checkpoints', '--pose-config', '--batch-size',
                   '--dtype', '--det-model', '--bbox-thr', '--nms-thr',
                   '--bboxes', '--max-frames', '--out-dir'):
        assert option in text
    # every option reaches the inferencer
    cfg_path = tmp_path / 'depth_small.py'
    small_cfg('depth').dump(str(cfg_path))
    folder = tmp_path / 'imgs'
    folder.mkdir()
    for i in range(3):
        cv2.imwrite(str(folder / f'{i}.png'), image(30, 20, i))
    summary = main([
        str(folder), '--depth-config', str(cfg_path), '--out-dir',
        str(tmp_path / 'out'), '--batch-size', '2', '--no-save-vis',
        '--no-progress', '--device', 'cpu'
    ])
    assert [s['name'] for s in summary] == ['0', '1', '2']
    assert all(s['vis_files'] == {} for s in summary)
    for i in range(3):
        assert np.load(tmp_path / f'out/depth/{i}.npy').shape == (30, 20)
    # an official-style name is recognised: task and size -> shipped config
    from mmengine.registry import DefaultScope
    from mmseg.registry import MODELS
    with DefaultScope.overwrite_default_scope('mmseg'):
        model = MODELS.build(Config.fromfile(str(TINY['depth'])).model)
    ckpt = tmp_path / 'sapiens_tiny_render_people_epoch_1.pth'
    torch.save({'state_dict': model.state_dict(), 'meta': {}}, ckpt)
    (summary, ) = main([
        str(folder / '1.png'), '--checkpoints', str(ckpt), '--out-dir',
        str(tmp_path / 'out2'), '--no-progress', '--device', 'cpu'
    ])
    assert summary['pred_files'] == {'depth': str(tmp_path / 'out2/depth/1.npy')}
    assert summary['vis_files'] == {'depth': str(tmp_path / 'out2/depth/1.png')}
    with pytest.raises(ValueError, match='Two depth models'):
        main([str(folder), '--checkpoints', str(ckpt), '--depth-config',
              str(cfg_path)])
    with pytest.raises(ValueError, match='No model given'):
        main([str(folder)])
    args = build_parser().parse_args(
        ['0', '--pose', 'x.pth', '--bboxes', '[[0, 0, 5, 5]]'])
    assert args.inputs == ['0'] and args.pose == 'x.pth'


#: Every option of the inference CLI (``--debug`` is read by its ``cli()``
#: wrapper, for tracebacks, ``--trust-pt2`` records .pt2 models in the trust
#: store before they are built: tests/deploy/test_pt2_trust.py;
#: ``--launcher``, ``--overwrite``, ``--coco-results`` and
#: ``--progress-interval`` are read by the sharded run, see
#: tests/apis/test_sharded_inference.py; the others must reach the
#: inferencer).
CLI_OPTIONS = (
    '--out-dir', '--checkpoints', '--pose', '--pose-config', '--seg',
    '--seg-config', '--depth', '--depth-config', '--normal',
    '--normal-config', '--pointmap', '--pointmap-config', '--albedo',
    '--albedo-config', '--tasks', '--device', '--batch-size', '--dtype',
    '--compile', '--max-frames', '--detector', '--det-model', '--det-config',
    '--det-weights', '--det-checkpoint', '--det-cat-ids', '--det-cat-id',
    '--bbox-thr', '--nms-thr', '--bboxes',
    '--no-track', '--no-smooth', '--det-interval', '--min-cutoff', '--beta',
    '--d-cutoff', '--stabilize-dense', '--stabilize-alpha', '--kpt-thr',
    '--no-draw-bbox', '--no-save-pred', '--no-save-vis', '--show',
    '--wait-time', '--no-progress', '--skeleton-style', '--export-format',
    '--save-mask', '--debug', '--trust-pt2', '--matting', '--matting-config',
    '--stabilize-matting', '--stabilize-pointmap-scale', '--mask-with',
    '--background', '--alpha-bits', '--launcher', '--overwrite',
    '--coco-results', '--progress-interval', '--no-whole-image-fallback',
    '--verbose', '--rank-timeout',  # reaches the run: test_sharded_inference
)


def test_every_cli_option_reaches_the_inferencer(monkeypatch, tmp_path):
    """Each option of the inference CLI arrives at SapiensInferencer's
    constructor or stream() with its value (the inference itself is tested
    above); the pattern of test_export_cli_arguments. An option added to
    the CLI without a line here fails the first assertion."""
    import sapiens_mm.apis.inferencers as inferencers
    parser = build_parser()
    options = {o for a in parser._actions for o in a.option_strings
               if o.startswith('--') and o != '--help'}
    assert options == set(CLI_OPTIONS)
    calls = {}

    class Recorder:
        tasks, skipped = ('pose', ), []

        def __init__(self, **kwargs):
            calls['init'] = kwargs
            # the device resolved, as SapiensInferencer keeps it
            self.device = torch.device(kwargs['device'] or (
                'cuda' if torch.cuda.is_available() else 'cpu'))

        def stream(self, inputs, **kwargs):
            calls['stream'] = (inputs, kwargs)
            yield dict(input='x', name='x', frame_index=None, pred_files={},
                       vis_files={}, nonfinite={})

    monkeypatch.setattr(inferencers, 'SapiensInferencer', Recorder)
    # --show: as on a machine with a display
    import sapiens_mm.cli.preflight as preflight
    monkeypatch.setattr(preflight, 'display_problem', lambda: None)
    # the files the options name (checked before any model loads)
    monkeypatch.chdir(tmp_path)
    for name in ('a.jpg', 'b.png', 'p.pth', 'p.py', 'd.onnx', 'n.py',
                 'pm.pth', 'pm.py', 'al.py', 'm.py', 's.py', 'det.py',
                 'det.pth',
                 'sapiens_0.3b_goliath_best_goliath_mIoU_7673_epoch_194.pth'):
        (tmp_path / name).write_text('')
    boxes = tmp_path / 'boxes.json'
    boxes.write_text('[[1, 2, 30, 40, 0.9]]')
    out = tmp_path / 'out'
    main([
        'a.jpg', '3', '--out-dir', str(out), '--checkpoints',
        'sapiens_0.3b_goliath_best_goliath_mIoU_7673_epoch_194.pth',
        '--pose', 'p.pth', '--pose-config', 'p.py', '--depth', 'd.onnx',
        '--normal-config', 'n.py', '--pointmap', 'pm.pth',
        '--pointmap-config', 'pm.py', '--albedo-config', 'al.py',
        '--tasks', 'pose', 'seg', '--device',
        'cuda:1', '--batch-size', '4', '--dtype', 'bf16', '--compile',
        '--max-frames', '7', '--detector', 'haar', '--det-model', 'det.py',
        '--det-weights', 'det.pth', '--det-cat-ids', '2', '--bbox-thr',
        '0.5', '--nms-thr', '0.6', '--bboxes', str(boxes), '--no-track',
        '--no-smooth', '--det-interval', '3', '--min-cutoff', '1.5',
        '--beta', '0.25', '--d-cutoff', '2.5', '--stabilize-dense',
        '--stabilize-alpha', '0.75', '--kpt-thr', '0.7', '--no-draw-bbox',
        '--no-save-pred', '--no-save-vis', '--show', '--wait-time', '9',
        '--no-progress', '--skeleton-style', 'openpose', '--export-format',
        'coco17', 'openpose', '--save-mask', '--debug', '--matting-config',
        'm.py', '--stabilize-matting', '--stabilize-pointmap-scale',
        '--mask-with', 'seg', '--background', 'white', '--alpha-bits', '16',
        '--no-whole-image-fallback', '--verbose'
    ])
    assert calls['init'] == dict(
        models=dict(
            pose=dict(config='p.py', checkpoint='p.pth'),
            depth=dict(config=None, checkpoint='d.onnx'),
            normal=dict(config='n.py', checkpoint=None),
            pointmap=dict(config='pm.py', checkpoint='pm.pth'),
            albedo=dict(config='al.py', checkpoint=None),
            matting=dict(config='m.py', checkpoint=None),
            seg=dict(
                config=None,
                checkpoint='sapiens_0.3b_goliath_best_goliath_mIoU_7673_'
                'epoch_194.pth')),
        tasks=['pose', 'seg'], device='cuda:1', batch_size=4, dtype='bf16',
        compile=True, detector='haar', det_model='det.py',
        det_weights='det.pth', det_cat_ids=[2], bbox_thr=0.5, nms_thr=0.6,
        kpt_thr=0.7, track=False, smooth=False, det_interval=3,
        tracker_cfg=dict(min_cutoff=1.5, beta=0.25, d_cutoff=2.5),
        stabilize_dense=True, stabilize_alpha=0.75, mask_with='seg',
        stabilize_matting=True, stabilize_pointmap_scale=True,
        whole_image_fallback=False)
    inputs, kwargs = calls['stream']
    assert inputs == ['a.jpg', 3]  # a digit that is no file: a webcam
    assert kwargs == dict(out_dir=str(out), bboxes=[[1, 2, 30, 40, 0.9]],
                          no_save_pred=True, no_save_vis=True, show=True,
                          wait_time=9, draw_bbox=False, max_frames=7,
                          show_progress=False, skeleton_style='openpose',
                          export_formats=['coco17', 'openpose'],
                          save_mask=True, background='white',
                          alpha_bits=16)
    # the defaults
    main(['b.png', '--seg-config', 's.py', '--out-dir', str(out)])
    assert calls['init'] == dict(
        models=dict(seg=dict(config='s.py', checkpoint=None)), tasks=None,
        device=None, batch_size=1, dtype='auto', compile=False,
        detector='auto', det_model=None, det_weights=None, det_cat_ids=[0],
        bbox_thr=0.3, nms_thr=0.3, kpt_thr=0.3, track=True, smooth=True,
        det_interval=1, tracker_cfg=dict(min_cutoff=4.0, beta=4.0,
                                         d_cutoff=1.0),
        stabilize_dense=False, stabilize_alpha=0.5, mask_with=None,
        stabilize_matting=False, stabilize_pointmap_scale=False,
        whole_image_fallback=True)
    assert calls['stream'] == (['b.png'], dict(
        out_dir=str(out), bboxes=None, no_save_pred=False,
        no_save_vis=False, show=False, wait_time=1, draw_bbox=True,
        max_frames=None, show_progress=True, skeleton_style='mmpose',
        export_formats=[], save_mask=False, background=None, alpha_bits=8))
