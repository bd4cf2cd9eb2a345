"""The single-task inferencers (:class:`~sapiens_mm.apis.PoseInferencer`,
:class:`~sapiens_mm.apis.DenseInferencer`) as mmengine ``BaseInferencer``
subclasses: values against the stock mmseg / mmpose front ends on the same
checkpoint, batching, folder inputs, data samples, written files and bad
arguments.

The shipped tiny configs at their own input size (256 x 192), with random
weights saved as a checkpoint file that both our builder and the stock
``init_model`` load.

Sapiens2 task models in SapiensInferencer and tools/infer.py, next to a
v1 model: official file names recognised, pointmaps written as .npy and a
coloured .ply, the seg-29 drawing with its legend.
"""
import json
import subprocess
import sys

import cv2
import mmengine.infer
import numpy as np
import pytest
import torch
from inference_helpers import image, well_posed
from mmpose.structures import PoseDataSample
from mmseg.structures import SegDataSample
from sapiens2_helpers import ROOT, build_tiny
from tiny_configs import TINY

from sapiens_mm.apis import (
    DenseInferencer,
    PoseInferencer,
    SapiensInferencer,
    init_model,
)
from sapiens_mm.checkpoint.sapiens2_layout import save_official_checkpoint
from sapiens_mm.utils.image_io import UnreadableImageError
from sapiens_mm.zoo import safe_checkpoint_loading

BOX = np.array([[10, 8, 80, 110]], np.float32)


@pytest.fixture(scope='module')
def checkpoints(tmp_path_factory):
    """Random weights of each task's tiny model, as a checkpoint file."""
    root = tmp_path_factory.mktemp('ckpts')
    out = {}
    for i, task in enumerate(('pose', 'seg', 'depth', 'normal')):
        torch.manual_seed(i)
        model = init_model(str(TINY[task]))
        out[task] = str(root / f'{task}.pth')
        torch.save({'state_dict': model.state_dict(),
                    'meta': {'dataset_meta': model.dataset_meta}}, out[task])
    return out


@pytest.fixture(scope='module')
def seg(checkpoints):
    return DenseInferencer(str(TINY['seg']), checkpoints['seg'],
                           device='cpu', show_progress=False)


@pytest.fixture(scope='module')
def depth(checkpoints):
    return DenseInferencer(str(TINY['depth']), checkpoints['depth'],
                           device='cpu', show_progress=False)


@pytest.fixture(scope='module')
def pose(checkpoints):
    return PoseInferencer(str(TINY['pose']), checkpoints['pose'],
                          device='cpu', detector='none', show_progress=False)


@pytest.fixture(scope='module')
def photo():
    return image(120, 90, 3)


def test_they_are_mmengine_inferencers(seg, pose):
    assert isinstance(seg, mmengine.infer.BaseInferencer)
    assert isinstance(pose, mmengine.infer.BaseInferencer)
    assert {'bboxes', 'bbox_thr', 'nms_thr'} <= pose.preprocess_kwargs
    assert {'vis_out_dir', 'return_vis', 'show', 'draw_bbox',
            'skeleton_style'} <= pose.visualize_kwargs
    assert pose.postprocess_kwargs == {'pred_out_dir'}
    # dense: also the bit depth of a matting model's alpha PNGs
    assert seg.postprocess_kwargs == {'pred_out_dir', 'alpha_bits'}
    assert 'background' in seg.visualize_kwargs


@pytest.mark.parametrize('task', ['seg', 'depth', 'normal'])
def test_dense_equals_stock_mmseg_inference_model(checkpoints, photo, task):
    from mmseg.apis import inference_model
    from mmseg.apis import init_model as mmseg_init_model
    stock = inference_model(
        mmseg_init_model(str(TINY[task]), checkpoints[task], device='cpu'),
        photo)
    out = DenseInferencer(str(TINY[task]), checkpoints[task], device='cpu',
                          show_progress=False)(photo)
    (ours, ) = out['predictions']
    assert out['visualization'] == []
    if task == 'seg':
        assert ours.shape == photo.shape[:2] and ours.dtype == np.uint8
        np.testing.assert_array_equal(ours, stock.pred_sem_seg.data[0].numpy())
    elif task == 'depth':
        assert ours.shape == photo.shape[:2] and ours.dtype == np.float32
        # the same pipeline and weights run in both: float32 rounding only
        np.testing.assert_allclose(ours, stock.pred_depth_map.data[0].numpy(),
                                   atol=1e-5)
    else:
        assert ours.shape == photo.shape and ours.dtype == np.float32
        np.testing.assert_allclose(
            ours, stock.pred_normal_map.data.numpy().transpose(1, 2, 0),
            atol=1e-5)


def test_pose_equals_stock_mmpose_inference_topdown(checkpoints, pose,
                                                    photo, monkeypatch):
    from mmpose.apis import inference_topdown
    from mmpose.apis import init_model as mmpose_init_model
    # the checkpoint's meta holds numpy arrays: read by sapiens_mm's reader
    with safe_checkpoint_loading():
        model = mmpose_init_model(str(TINY['pose']), checkpoints['pose'],
                                  device='cpu')
    well_posed(model, monkeypatch)
    well_posed(pose.model, monkeypatch)
    (stock, ) = inference_topdown(model, photo, BOX)
    (ours, ) = pose(photo, bboxes=[BOX])['predictions']
    assert ours['bbox_source'] == 'user' and ours['skeleton'] == 'goliath'
    np.testing.assert_array_equal(ours['bboxes'], BOX)
    np.testing.assert_array_equal(ours['bbox_scores'], [1])
    assert ours['keypoints'].shape == (1, 308, 2)
    # the batched UDP decoder against mmpose's per-person one on the same
    # crop and head output: float32 rounding only
    np.testing.assert_allclose(ours['keypoints'],
                               stock.pred_instances.keypoints, atol=1e-4,
                               rtol=0)
    np.testing.assert_allclose(ours['keypoint_scores'],
                               stock.pred_instances.keypoint_scores,
                               atol=1e-5)


def test_batch_of_two_equals_one_by_one(depth, pose, monkeypatch):
    imgs = [image(70, 50, 1), image(40, 60, 2)]
    together = depth(imgs, batch_size=2)['predictions']
    for img, batched in zip(imgs, together):
        (alone, ) = depth(img)['predictions']
        # one forward of two images against two of one: float32 rounding
        np.testing.assert_allclose(batched, alone, atol=1e-4)
    well_posed(pose.model, monkeypatch)
    boxes = [np.array([[2, 3, 30, 60], [20, 10, 48, 66]]), None]
    together = pose(imgs, batch_size=2, bboxes=boxes)['predictions']
    assert [p['keypoints'].shape for p in together] == [(2, 308, 2),
                                                        (1, 308, 2)]
    assert [p['bbox_source'] for p in together] == ['user', 'whole_image']
    for img, box, batched in zip(imgs, boxes, together):
        (alone, ) = pose(img, bboxes=box)['predictions']
        np.testing.assert_array_equal(batched['bboxes'], alone['bboxes'])
        np.testing.assert_allclose(batched['keypoints'], alone['keypoints'],
                                   atol=1e-4, rtol=0)
        np.testing.assert_allclose(batched['keypoint_scores'],
                                   alone['keypoint_scores'], atol=1e-4)


def test_folder_equals_list_of_its_files(seg, tmp_path):
    folder = tmp_path / 'imgs'
    (folder / 'sub').mkdir(parents=True)
    files = [folder / 'a.png', folder / 'sub' / 'b.png']
    for i, f in enumerate(files):
        cv2.imwrite(str(f), image(50 + 10 * i, 40, i))
    (folder / 'notes.txt').write_text('not an image')
    from_folder = seg(str(folder))['predictions']
    from_list = seg([str(f) for f in files])['predictions']
    assert len(from_folder) == 2
    for a, b, f in zip(from_folder, from_list, files):
        np.testing.assert_array_equal(a, b)
        assert a.shape == cv2.imread(str(f)).shape[:2]


def test_return_datasamples(seg, pose, photo, tmp_path):
    path = tmp_path / 'person.png'
    cv2.imwrite(str(path), photo)
    labels = seg([str(path), photo])['predictions']
    samples = seg([str(path), photo], return_datasamples=True)['predictions']
    assert all(isinstance(s, SegDataSample) for s in samples)
    for s, arr in zip(samples, labels):
        np.testing.assert_array_equal(s.pred_sem_seg.data[0].numpy(), arr)
    assert [(s.img_path, s.output_name) for s in samples] == [
        (str(path), 'person'), ('array_0001', 'array_0001')]
    boxes = np.array([[2, 3, 60, 100], [30, 10, 88, 118]])
    (merged, ) = pose(photo, bboxes=boxes,
                      return_datasamples=True)['predictions']
    assert isinstance(merged, PoseDataSample)
    assert merged.bbox_source == 'user' and merged.skeleton == 'goliath'
    (people, ) = pose(photo, bboxes=boxes)['predictions']
    np.testing.assert_array_equal(merged.pred_instances.keypoints,
                                  people['keypoints'])
    np.testing.assert_array_equal(merged.pred_instances.bboxes, boxes)


def test_written_files_hold_the_returned_values(seg, pose, tmp_path):
    # two inputs named "x": distinct outputs x and x_1
    (tmp_path / 'a').mkdir()
    (tmp_path / 'b').mkdir()
    inputs = [str(tmp_path / 'a' / 'x.png'), str(tmp_path / 'b' / 'x.jpg')]
    cv2.imwrite(inputs[0], image(60, 45, 7))
    cv2.imwrite(inputs[1], image(50, 70, 8))
    vis, pred = tmp_path / 'vis', tmp_path / 'pred'
    out = seg(inputs, return_vis=True, vis_out_dir=str(vis),
              pred_out_dir=str(pred))
    for name, labels, drawing in zip(('x', 'x_1'), out['predictions'],
                                     out['visualization']):
        np.testing.assert_array_equal(np.load(pred / f'{name}.npy'), labels)
        np.testing.assert_array_equal(
            cv2.imread(str(pred / f'{name}.png'), cv2.IMREAD_UNCHANGED),
            labels)
        assert drawing.shape[2] == 3 and drawing.dtype == np.uint8
        np.testing.assert_array_equal(cv2.imread(str(vis / f'{name}.png')),
                                      drawing)
    out = pose(inputs, return_vis=True, vis_out_dir=str(vis / 'pose'),
               pred_out_dir=str(pred / 'pose'))
    for name, path, people, drawing in zip(('x', 'x_1'), inputs,
                                           out['predictions'],
                                           out['visualization']):
        record = json.loads((pred / 'pose' / f'{name}.json').read_text())
        assert record['input'] == path and record['num_keypoints'] == 308
        assert (record['height'], record['width']) == cv2.imread(
            path).shape[:2]
        (inst, ) = record['instances']
        kpts = np.array(inst['keypoints']).reshape(308, 3)  # x, y, score
        np.testing.assert_allclose(kpts[:, :2], people['keypoints'][0],
                                   rtol=1e-6)
        np.testing.assert_allclose(kpts[:, 2], people['keypoint_scores'][0],
                                   rtol=1e-6)
        np.testing.assert_array_equal(
            cv2.imread(str(vis / 'pose' / f'{name}.png')), drawing)


def test_bad_arguments(seg, pose, checkpoints, tmp_path, photo):
    with pytest.raises(ValueError, match='unknown argument'):
        seg(photo, bboxes=BOX)  # a pose argument
    with pytest.raises(ValueError, match='unknown argument'):
        pose(photo, out_dir=str(tmp_path))
    bad = tmp_path / 'broken.jpg'
    bad.write_bytes(b'this is not a jpeg')
    with pytest.raises(UnreadableImageError, match='broken.jpg'):
        seg([photo, str(bad)])
    (tmp_path / 'clip.mp4').write_bytes(b'')
    with pytest.raises(ValueError, match='SapiensInferencer'):
        seg(str(tmp_path / 'clip.mp4'))
    with pytest.raises(ValueError, match='batch_size'):
        seg(photo, batch_size=0)
    with pytest.raises(ValueError, match='run it with PoseInferencer'):
        DenseInferencer(str(TINY['pose']), checkpoints['pose'], device='cpu')
    with pytest.raises(ValueError, match='not a config'):
        PoseInferencer(checkpoints['pose'], checkpoints['pose'])


def test_show_uses_windows_and_q_stops_showing(seg, monkeypatch):
    shown, waits, keys = [], [], iter([-1, ord('q')])
    monkeypatch.setattr(cv2, 'imshow', lambda name, img: shown.append(name))
    monkeypatch.setattr(cv2, 'waitKey', lambda ms: waits.append(ms) or next(
        keys))
    monkeypatch.setattr(cv2, 'destroyAllWindows', lambda: None)
    imgs = [image(40, 30, i) for i in range(3)]
    out = seg(imgs, show=True, wait_time=5)
    # image 1 shown, image 2 shown and q pressed: image 3 is not shown
    assert shown == ['Sapiens seg'] * 2 and waits == [5, 5]
    assert len(out['predictions']) == 3 and out['visualization'] == []


def person_image(h=120, w=90):
    img = np.full((h, w, 3), 40, np.uint8)
    cv2.ellipse(img, (w // 2, h // 2), (w // 4, h // 3), 0, 0, 360,
                (60, 140, 220), -1)
    return img


@pytest.fixture(scope='module')
def sapiens2_checkpoints(tmp_path_factory):
    """Official-layout Sapiens2 files under their official names (tiny) and
    a v1 tiny depth checkpoint under its official name."""
    out = tmp_path_factory.mktemp('sapiens2_ckpt')
    files = {}
    for task in ('seg', 'pointmap', 'pose'):
        torch.manual_seed(0)
        _, model = build_tiny(task)
        if task == 'pointmap':  # a positive scale
            with torch.no_grad():
                model.decode_head.scale_final_layer[-1].bias += 1.0
        path = out / f'sapiens2_tiny_{task}.safetensors'
        save_official_checkpoint(model, str(path))
        files[task] = str(path)
    from mmengine.config import Config
    from mmengine.registry import init_default_scope
    from mmseg.registry import MODELS
    init_default_scope('mmseg')
    cfg = Config.fromfile(
        str(ROOT / 'configs/depth/sapiens_tiny-200e_depth_folder-256x192.py'))
    depth = MODELS.build(cfg.model)
    path = out / 'sapiens_tiny_render_people_epoch_1.pth'
    torch.save(dict(state_dict=depth.state_dict()), path)
    files['depth'] = str(path)
    return files


def test_inferencer_runs_sapiens2_files_next_to_v1(sapiens2_checkpoints,
                                                    tmp_path):
    inferencer = SapiensInferencer(
        models=[sapiens2_checkpoints['seg'],
                sapiens2_checkpoints['pointmap'],
                sapiens2_checkpoints['depth']], device='cpu', detector='none')
    infos = inferencer.model_infos
    assert (infos['seg'].version, infos['pointmap'].version,
            infos['depth'].version) == (2, 2, 1)
    img = person_image()
    [result] = list(inferencer([img], out_dir=str(tmp_path)))
    pred = result['predictions']
    seg, points = pred['seg'], pred['pointmap']
    assert seg.shape == (120, 90) and seg.max() < 29
    assert points.shape == (120, 90, 3) and points.dtype == np.float32
    fg = seg > 0
    # outside the seg foreground the pointmap is NaN, inside finite
    assert np.isnan(points[~fg]).all() and np.isfinite(points[fg]).all()
    saved = np.load(result['pred_files']['pointmap'])
    np.testing.assert_array_equal(saved, points)
    ply = result['pred_files']['pointmap_ply']
    with open(ply, 'rb') as f:
        header = f.read(300).split(b'end_header')[0].decode()
    assert f'element vertex {int(fg.sum())}' in header
    assert 'property uchar red' in header
    # seg-29 drawing: image plus the legend panel
    vis = cv2.imread(result['vis_files']['seg'])
    assert vis.shape[0] > 120 and vis.shape[1] > 90  # + the caption
    assert inferencer.task_inferencers['seg'].dataset_meta['vocab'] == \
        'dome_29'


def test_sapiens2_pose_equals_stock_mmpose(sapiens2_checkpoints,
                                           monkeypatch):
    """Sapiens2 pose keypoints from the official-layout file alone equal
    those of stock ``mmpose.apis.inference_topdown`` (mmpose's own
    pipeline, Sapiens2 affine and UDP decoding) on the same weights and the
    whole-image box. Heatmaps are made well posed (one clear peak per
    keypoint plus 1 % of the model's output, no flip test), as in the v1
    comparison, so that the 1e-4 px bound tests the geometry rather than
    float32 summation order in nearly flat heatmaps."""
    from mmpose.apis import inference_topdown
    from mmpose.apis import init_model as mmpose_init_model
    from sapiens2_helpers import leaf

    inferencer = SapiensInferencer(models=[sapiens2_checkpoints['pose']],
                                   device='cpu', detector='none')
    ours_model = inferencer.task_inferencers['pose'].model
    stock = mmpose_init_model(str(leaf('pose', 'tiny')), None, device='cpu')
    stock.load_state_dict(ours_model.state_dict())
    well_posed(ours_model, monkeypatch)
    well_posed(stock, monkeypatch)
    img = person_image()
    [result] = list(inferencer([img], show_progress=False))
    ours = result['predictions']['pose']['keypoints']
    h, w = img.shape[:2]
    (sample, ) = inference_topdown(stock, img,
                                   bboxes=np.array([[0, 0, w, h]],
                                                   np.float32))
    np.testing.assert_allclose(ours, sample.pred_instances.keypoints,
                               atol=1e-4, rtol=0)
    assert ours.shape == (1, 308, 2)


@pytest.mark.parametrize('task', ['pointmap', 'albedo'])
def test_sapiens2_dense_maps_equal_stock_mmseg(task, tmp_path):
    """Sapiens2 pointmap / albedo maps from the official-layout file alone
    equal what stock ``mmseg.apis.inference_model`` predicts with the same
    weights (mmseg's own test pipeline and the estimator's predict). The
    bound is float32 rounding of two separately run forwards."""
    from mmseg.apis import inference_model
    from mmseg.apis import init_model as mmseg_init_model
    from sapiens2_helpers import leaf

    torch.manual_seed(1)
    _, model = build_tiny(task)
    with torch.no_grad():  # a positive pointmap scale, visible albedo
        if task == 'pointmap':
            model.decode_head.scale_final_layer[-1].bias += 1.0
    path = tmp_path / f'sapiens2_tiny_{task}.safetensors'
    save_official_checkpoint(model, str(path))
    inferencer = SapiensInferencer(models=[str(path)], device='cpu',
                                   detector='none')
    img = person_image()
    [result] = list(inferencer([img], show_progress=False))
    ours = result['predictions'][task]
    stock = mmseg_init_model(str(leaf(task, 'tiny')), None, device='cpu')
    stock.load_state_dict(model.state_dict())
    sample = inference_model(stock, img)
    field = dict(pointmap='pred_pointmap', albedo='pred_albedo_map')[task]
    theirs = sample.get(field).data.permute(1, 2, 0).numpy()
    assert ours.shape == theirs.shape == (120, 90, 3)
    np.testing.assert_allclose(ours, theirs, atol=1e-5, rtol=1e-5)
    assert np.abs(ours).max() > 1e-3  # not a trivially empty map


@pytest.mark.slow
def test_infer_cli_with_sapiens2_and_v1_checkpoints(sapiens2_checkpoints,
                                                    tmp_path):
    img = tmp_path / 'person.png'
    cv2.imwrite(str(img), person_image())
    out = tmp_path / 'out'
    proc = subprocess.run(
        [sys.executable, str(ROOT / 'tools/infer.py'), str(img),
         '--checkpoints', sapiens2_checkpoints['seg'],
         sapiens2_checkpoints['pointmap'], sapiens2_checkpoints['depth'],
         '--out-dir', str(out), '--detector', 'none', '--no-progress'],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for rel in ('seg/person.npy', 'pointmap/person.npy',
                'pointmap/person.ply', 'depth/person.npy',
                'pointmap/person.png'):
        assert (out / rel).is_file(), rel
    assert np.load(out / 'pointmap/person.npy').shape == (120, 90, 3)
