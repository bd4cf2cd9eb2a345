"""Export to ONNX / torch.export (.pt2): exported outputs against eager
mmpose / mmseg at batch 1 and 3 (one dynamic-batch file), the files run
where sapiens_mm and OpenMMLab cannot be imported, the inferencer and CLI
run an .onnx model like the eager one, and bad input is refused clearly.

The tiny configs at a 64x48 input; every task is exported once (module
fixture), which is most of this file's time.

ONNX and .pt2 export of every Sapiens2 task model (tiny arch, fp32):
one file with a dynamic batch, outputs equal to eager at batch 1 and 3.
"""
import json
import os
import subprocess
import sys

import cv2
import numpy as np
import onnx
import pytest
import torch
from inference_helpers import peaked_heatmaps
from mmengine.config import Config
from sapiens2_helpers import LEAF, leaf
from tiny_configs import ROOT, TINY

from sapiens_mm.apis import DenseInferencer, SapiensInferencer
from sapiens_mm.apis.inference import init_model, pose_dataset_meta, set_input_size
from sapiens_mm.cli.deploy import build_parser
from sapiens_mm.cli.deploy import main as export_main
from sapiens_mm.cli.infer import main as infer_main
from sapiens_mm.deploy import (
    ExportedModel,
    export_model,
    read_metadata,
)

pytestmark = pytest.mark.slow

TASKS = tuple(TINY)
HW = (64, 48)
BLOCKED = ('sapiens_mm', 'mmengine', 'mmcv', 'mmpose', 'mmseg', 'mmpretrain',
           'mmdet')


def image(h, w, seed):
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    return cv2.GaussianBlur(img, (5, 5), 0)


#: Added to the (flip-averaged) heatmaps of both runtimes before decoding:
#: one clear peak per keypoint, 20 high (the model's own heatmaps are about
#: 1 +- 0.3 here; DARK clips at 50), so that argmax and DARK refinement are
#: well-posed and the runtimes' 1e-6 output differences move keypoints by
#: about 1e-6 px (on a random-weight model's own heatmaps the argmax can
#: have near-equal rivals: 1e-6 noise moves 1.6 % of keypoints by more than
#: 0.01 px). The model's output still shifts the sub-pixel positions.
PEAKS = 20 * peaked_heatmaps(16, 12)


def assert_keypoints_equal(got, ref):
    """Every keypoint agrees to 1e-4 px (float32 rounding between the
    runtimes on well-posed heatmaps)."""
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, atol=1e-4, rtol=0)


@pytest.fixture
def peaked_eager(eager, monkeypatch):
    """The eager inferencer with :data:`PEAKS` added before decoding."""
    head = eager.models['pose'].head
    decode = head.decode
    monkeypatch.setattr(head, 'decode', lambda out: decode(out + PEAKS))
    return eager


@pytest.fixture(scope='module')
def eager(exported):
    """The eager inferencer on the exported models' configs and weights."""
    return SapiensInferencer(
        models={t: (exported[t]['cfg'], exported[t]['ckpt'])
                for t in TASKS},
        device='cpu',
        detector='none')


@pytest.fixture(scope='module')
def exported(tmp_path_factory):
    """Per task: the tiny config at 64x48, a checkpoint with perturbed
    weights (so outputs vary across pixels and classes), the eager model
    and the exported files."""
    out = tmp_path_factory.mktemp('export')
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    result = {}
    for i, task in enumerate(TASKS):
        torch.manual_seed(i)
        cfg = set_input_size(Config.fromfile(str(TINY[task])), HW)
        model = init_model(cfg)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.05)
            if task == 'pose':  # positive heatmaps: a well-posed DARK step
                model.head.final_layer.bias += 1.0
        ckpt = out / f'{task}.pth'
        torch.save(dict(state_dict=model.state_dict()), ckpt)
        files = export_model(cfg, str(ckpt), str(out), name=task)
        result[task] = dict(cfg=cfg, ckpt=str(ckpt), model=model, **files)
    torch.set_num_threads(threads)
    return result


def eager_output(task, model, cfg, images):
    """The eager model's raw output (pose: flip-test heatmaps through
    mmpose's head.predict) for a (N, 3, H, W) uint8 BGR batch."""
    if task != 'pose':
        data = model.data_preprocessor(dict(inputs=list(images)), False)
        with torch.no_grad():
            return model(data['inputs'], mode='tensor').numpy()
    from mmpose.structures import PoseDataSample

    meta = pose_dataset_meta(cfg)
    samples = [
        PoseDataSample(metainfo=dict(flip_indices=meta['flip_indices']))
        for _ in images
    ]
    data = model.data_preprocessor(
        dict(inputs=list(images), data_samples=samples), False)
    x = data['inputs']
    with torch.no_grad():
        feats = [model.extract_feat(x), model.extract_feat(x.flip(-1))]
        test_cfg = dict(model.test_cfg, output_heatmaps=True)
        _, fields = model.head.predict(feats, samples, test_cfg=test_cfg)
        return torch.stack([f.heatmaps for f in fields]).numpy()


@pytest.mark.parametrize('task', TASKS)
def test_exported_matches_eager(exported, task):
    e = exported[task]
    onnx_model = ExportedModel(e['onnx'])
    pt2_model = ExportedModel(e['pt2'])
    rng = np.random.default_rng(0)
    for batch in (1, 3):
        images = torch.from_numpy(
            rng.integers(0, 256, (batch, 3, *HW), dtype=np.uint8))
        ref = eager_output(task, e['model'], e['cfg'], images)
        assert ref.std() > 1e-3  # outputs that vary: a real comparison
        for model in (onnx_model, pt2_model):
            out = model(images.numpy().astype(np.float32))
            assert out.shape == ref.shape
            assert np.abs(out - ref).max() < 1e-4, (task, batch, model.path)
    # one file, both batch sizes: the batch dimension is symbolic
    graph = onnx.load(e['onnx'], load_external_data=False).graph
    dims = graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param and [d.dim_value for d in dims[1:]] == [3, *HW]


def test_metadata(exported):
    pose = read_metadata(exported['pose']['onnx'])
    assert pose['task'] == 'pose' and pose['input_size'] == list(HW)
    assert pose['output_shape'] == ['batch', 308, 16, 12]
    assert pose['output_stride'] == 4 and pose['flip_test_in_graph']
    assert pose['num_keypoints'] == 308 == len(pose['keypoint_names'])
    assert pose['skeleton'] == 'goliath'
    assert pose['codec'] == dict(type='UDPHeatmap',
                                 input_size=[48, 64],
                                 heatmap_size=[12, 16],
                                 blur_kernel_size=11)
    assert pose['channel_order'] == 'BGR'
    assert pose['mean'] == [123.675, 116.28, 103.53]
    seg = read_metadata(exported['seg']['onnx'])
    assert seg['num_classes'] == 28 == len(seg['class_names'])
    assert seg['class_names'][0] == 'Background'
    assert seg['output_shape'] == ['batch', 28, 32, 24]
    assert read_metadata(
        exported['depth']['onnx'])['output_shape'] == ['batch', 1, 64, 48]
    assert read_metadata(exported['normal']['onnx'])['output_stride'] == 2
    for task in TASKS:  # embedded in the .pt2, and in its JSON sidecar
        meta = read_metadata(exported[task]['pt2'])
        with open(exported[task]['pt2_json']) as f:
            assert json.load(f) == meta == read_metadata(
                exported[task]['onnx'])
        opsets = onnx.load(exported[task]['onnx'],
                           load_external_data=False).opset_import
        assert {o.version for o in opsets if o.domain == ''} == {18}


_STANDALONE = '''
import importlib.abc, sys
BLOCKED = {blocked!r}
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in BLOCKED:
            raise ImportError(name + ' is blocked')
sys.meta_path.insert(0, Block())
import cv2, numpy as np, runpy
ns = runpy.run_path({runner!r})
img = cv2.imread({image!r})
peaks = np.load({peaks!r})
out = {{}}
for path in {files!r}:
    run, meta = ns['load_model'](path)
    if meta['task'] == 'pose':  # well-posed heatmaps, as in eager
        run = lambda x, run=run: run(x) + peaks
    box = np.array([[4, 6, 44, 58]], np.float32)
    pred = ns['predict'](run, meta, img, box if meta['task'] == 'pose' else None)
    for k, v in pred.items():
        out[path + ':' + k] = v
np.savez({result!r}, **out)
print('imported:', sorted(m for m in sys.modules if m.split('.')[0] in BLOCKED))
'''


@pytest.mark.parametrize('fmt', ['onnx', 'pt2'])
def test_standalone_runner_without_sapiens_mm(exported, peaked_eager,
                                              tmp_path, fmt):
    """tools/deploy/run_exported.py, in a process where sapiens_mm and
    OpenMMLab (and, for ONNX, torch) cannot be imported, reproduces the
    eager inferencer's predictions. .pt2: pose and seg only (loading a .pt2
    costs seconds; depth / normal .pt2 are compared with eager above)."""
    img = image(70, 50, 1)
    cv2.imwrite(str(tmp_path / 'img.png'), img)
    tasks = TASKS if fmt == 'onnx' else ('pose', 'seg')
    blocked = BLOCKED + (('torch', ) if fmt == 'onnx' else ())
    np.save(tmp_path / 'peaks.npy', PEAKS.numpy())
    script = _STANDALONE.format(blocked=blocked,
                                peaks=str(tmp_path / 'peaks.npy'),
                                runner=str(ROOT /
                                           'tools/deploy/run_exported.py'),
                                image=str(tmp_path / 'img.png'),
                                files=[exported[t][fmt] for t in tasks],
                                result=str(tmp_path / 'out.npz'))
    proc = subprocess.run([sys.executable, '-c', script],
                          cwd=tmp_path,
                          capture_output=True,
                          text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'imported: []' in proc.stdout
    got = np.load(tmp_path / 'out.npz')

    (res, ) = peaked_eager(img, bboxes=[[4, 6, 44, 58]],
                           show_progress=False)
    pred = res['predictions']

    def get(task, key):
        return got[f'{exported[task][fmt]}:{key}']

    labels = get('seg', 'labels')
    assert labels.shape == (70, 50)
    assert (labels == pred['seg']).mean() > 0.999
    assert len(np.unique(labels)) > 3
    np.testing.assert_allclose(get('pose', 'keypoint_scores'),
                               pred['pose']['keypoint_scores'],
                               atol=1e-4)
    assert_keypoints_equal(get('pose', 'keypoints'), pred['pose']['keypoints'])
    if fmt == 'onnx':
        fg = pred['seg'] > 0  # eager masks depth / normals off the person
        np.testing.assert_allclose(get('depth', 'depth')[fg],
                                   pred['depth'][fg],
                                   atol=1e-4)
        np.testing.assert_allclose(get('normal', 'normal')[fg],
                                   pred['normal'][fg],
                                   atol=1e-4)


def test_runner_matches_mmpose():
    """The standalone runner's pose crop and heatmap decoding equal
    mmpose's GetBBoxCenterScale + TopdownAffine (UDP) and UDPHeatmap
    decoding (DARK-UDP) on well-posed (Gaussian) heatmaps."""
    import runpy

    from mmpose.codecs import UDPHeatmap
    from mmpose.datasets.transforms import GetBBoxCenterScale, TopdownAffine
    ns = runpy.run_path(str(ROOT / 'tools/deploy/run_exported.py'))
    meta = dict(input_size=[64, 48],
                bbox_padding=1.25,
                codec=dict(input_size=[48, 64],
                           heatmap_size=[12, 16],
                           blur_kernel_size=11))
    img = image(70, 50, 4)
    for box in ([4, 6, 44, 58], [10, 2, 20, 60], [-5, 10, 60, 30]):
        crop, center, scale = ns['crop_person'](img, box, meta)
        results = dict(img=img.copy(), bbox=np.array([box], np.float32))
        results = GetBBoxCenterScale()(results)
        results = TopdownAffine(input_size=(48, 64), use_udp=True)(results)
        np.testing.assert_array_equal(crop, results['img'].transpose(2, 0, 1))
        np.testing.assert_allclose(center, results['input_center'])
        np.testing.assert_allclose(scale, results['input_scale'])
    codec = UDPHeatmap(input_size=(48, 64), heatmap_size=(12, 16), sigma=2)
    rng = np.random.default_rng(0)
    kpts = rng.uniform([2, 2], [46, 62], (1, 30, 2)).astype(np.float32)
    heatmaps = codec.encode(kpts, np.ones((1, 30), np.float32))['heatmaps']
    heatmaps *= rng.uniform(0.3, 1.0, (30, 1, 1)).astype(np.float32)
    ref_k, ref_s = codec.decode(heatmaps.copy())
    got_k, got_s = ns['decode_heatmaps'](heatmaps.copy(), meta)
    np.testing.assert_allclose(got_k, ref_k[0], atol=1e-4)
    np.testing.assert_allclose(got_s, ref_s[0], atol=1e-6)


def test_inferencer_runs_onnx_like_eager(exported, peaked_eager, tmp_path,
                                        monkeypatch):
    eager = peaked_eager
    img = image(70, 50, 2)
    onnx_inf = SapiensInferencer(models=[exported[t]['onnx'] for t in TASKS],
                                 device='cpu',
                                 detector='none')
    run = ExportedModel.__call__

    def peaked(self, images):
        out = run(self, images)
        return out + PEAKS.numpy() if self.task == 'pose' else out

    monkeypatch.setattr(ExportedModel, '__call__', peaked)
    assert onnx_inf.tasks == eager.tasks
    boxes = [[4, 6, 44, 58], [0, 0, 50, 70]]
    (a, ) = eager(img, bboxes=boxes, show_progress=False, batch_size=2)
    (b, ) = onnx_inf(img,
                     bboxes=boxes,
                     out_dir=str(tmp_path / 'out'),
                     show_progress=False,
                     batch_size=2)
    pa, pb = a['predictions'], b['predictions']
    assert (pa['seg'] == pb['seg']).mean() > 0.999
    for task in ('depth', 'normal'):
        np.testing.assert_allclose(pb[task], pa[task], atol=1e-4)
    np.testing.assert_allclose(pb['pose']['keypoint_scores'],
                               pa['pose']['keypoint_scores'],
                               atol=1e-4)
    assert_keypoints_equal(pb['pose']['keypoints'], pa['pose']['keypoints'])
    assert (tmp_path / 'out/pose/array_0000.json').is_file()
    assert (tmp_path / 'out/seg/array_0000.png').is_file()


def test_cli_export_and_infer(exported, tmp_path):
    help_text = build_parser().format_help()
    for flag in ('--config', '--checkpoint', '--format', '--out-dir',
                 '--input-size', '--opset'):
        assert flag in help_text
    cv2.imwrite(str(tmp_path / 'p.png'), image(40, 30, 3))
    summary = infer_main([
        str(tmp_path / 'p.png'), '--checkpoints', exported['seg']['onnx'],
        '--out-dir',
        str(tmp_path / 'out'), '--no-progress', '--device', 'cpu'
    ])
    assert set(summary[0]['pred_files']) == {'seg'}
    labels = np.load(tmp_path / 'out/seg/p.npy')
    assert labels.shape == (40, 30) and labels.dtype == np.uint8


def test_export_cli_arguments(monkeypatch, tmp_path):
    """Every CLI option reaches export_model (the export itself is tested
    above)."""
    monkeypatch.chdir(tmp_path)  # the CLI creates its (relative) out dirs
    import sapiens_mm.deploy.export as export_mod
    monkeypatch.chdir(tmp_path)  # the CLI checks (creates) --out-dir
    calls = []
    monkeypatch.setattr(export_mod, 'export_model',
                        lambda *a, **k: calls.append((a, k)) or {})
    export_main([
        '--config', 'c.py', '--checkpoint', 'w.pth', '--format', 'onnx',
        '--out-dir', 'o', '--input-size', '32', '48', '--opset', '17',
        '--name', 'n', '--max-batch', '8'
    ])
    export_main(['--config', 'c.py'])
    assert calls == [
        (('c.py', 'w.pth', 'o'),
         dict(formats=('onnx', ),
              input_size=(32, 48),
              opset=17,
              name='n',
              max_batch=8)),
        (('c.py', None, 'exported'),
         dict(formats=('onnx', 'pt2'),
              input_size=None,
              opset=18,
              name=None,
              max_batch=1024)),
    ]


def test_bad_input(exported, tmp_path):
    with pytest.raises(ValueError, match='opset 16 is not supported'):
        export_model(str(TINY['seg']),
                     None,
                     str(tmp_path),
                     formats='onnx',
                     opset=16)
    with pytest.raises(SystemExit):
        export_main(['--config', str(TINY['seg']), '--opset', '16'])
    with pytest.raises(ValueError, match='formats must be'):
        export_model(str(TINY['seg']), None, str(tmp_path), formats='tflite')
    with pytest.raises(FileNotFoundError, match='Config not found'):
        export_model(str(tmp_path / 'nope.py'), None, str(tmp_path))
    with pytest.raises(FileNotFoundError, match='Checkpoint not found'):
        export_model(str(TINY['seg']), str(tmp_path / 'nope.pth'),
                     str(tmp_path))
    with pytest.raises(ValueError, match='multiples of the patch size'):
        set_input_size(Config.fromfile(str(TINY['seg'])), (60, 48))
    with pytest.raises(FileNotFoundError, match='Exported model not found'):
        read_metadata(str(tmp_path / 'missing.onnx'))
    plain = tmp_path / 'plain.onnx'  # an ONNX file not made by the exporter
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node('Identity', ['x'], ['y'])], 'g',
        [onnx.helper.make_tensor_value_info('x', onnx.TensorProto.FLOAT, [1])],
        [onnx.helper.make_tensor_value_info('y', onnx.TensorProto.FLOAT, [1])])
    onnx.save(onnx.helper.make_model(graph), str(plain))
    with pytest.raises(ValueError, match='no sapiens_mm export metadata'):
        read_metadata(str(plain))
    model = ExportedModel(exported['seg']['onnx'])
    with pytest.raises(ValueError, match=r'takes \(N, 3, 64, 48\) images'):
        model(np.zeros((1, 3, 32, 48), np.float32))
    with pytest.raises(ValueError, match='is a pose model'):
        SapiensInferencer(models={'seg': exported['pose']['onnx']},
                          device='cpu')
    with pytest.raises(ValueError, match='run it with dtype="fp32"'):
        SapiensInferencer(models=[exported['seg']['onnx']],
                          device='cpu',
                          dtype='bf16')
    other = Config.fromfile(str(TINY['seg']))  # pipeline at 256x192
    with pytest.raises(ValueError, match='takes 64x48'):
        SapiensInferencer(models=[(other, exported['seg']['onnx'])],
                          device='cpu')


def test_failed_onnx_export_leaves_no_file(tmp_path, monkeypatch):
    """A failure after the exporter has written (here: the check that
    reads the file back fails as on a full disk) leaves nothing under the
    final name and no temporary folder."""
    import errno

    cfg = set_input_size(Config.fromfile(str(TINY['seg'])), HW)
    cfg.model.backbone.init_cfg = None

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, 'No space left on device')

    monkeypatch.setattr(onnx, 'load', full_disk)
    out = tmp_path / 'out'
    with pytest.raises(OSError) as err:
        export_model(cfg, None, str(out), name='seg', formats=('onnx', ))
    assert str(out / 'seg.onnx') in str(err.value)
    assert os.listdir(out) == []


def test_dense_flip_test_in_graph():
    """test_cfg.flip=True of a normal model: the export module (run eagerly;
    the flip / concat ops themselves are exported in the pose graph above)
    gives SapiensDenseEstimator's flip-averaged prediction, X negated."""
    import torch.nn.functional as F

    from sapiens_mm.deploy import SapiensExportModule
    from sapiens_mm.deploy.export import check_test_cfg
    cfg = set_input_size(Config.fromfile(str(TINY['normal'])), HW)
    cfg.model.test_cfg = dict(mode='whole', flip=True)
    torch.manual_seed(0)
    model = init_model(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    assert check_test_cfg('normal', model) == (False, True)
    pre = cfg.model.data_preprocessor
    module = SapiensExportModule(model, 'normal', pre.mean, pre.std, True,
                                 flip_dense=True)
    images = torch.from_numpy(
        np.random.default_rng(0).integers(0, 256, (2, 3, *HW),
                                          dtype=np.uint8))
    x = model.data_preprocessor(dict(inputs=list(images)), False)['inputs']
    with torch.no_grad():
        ref = model.inference(x, [dict(img_shape=HW)] * 2)
        out = F.interpolate(module(images.float()), size=HW,
                            mode='bilinear', align_corners=False)
        plain = F.interpolate(model(x, mode='tensor'), size=HW,
                              mode='bilinear',
                              align_corners=False)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), atol=1e-5)
    assert (out - plain).abs().max() > 1e-3  # the flip changed something
    cfg.model.test_cfg = dict(mode='slide', crop_size=(32, 32),
                              stride=(16, 16))
    model = init_model(cfg)
    with pytest.raises(ValueError, match='set model.test_cfg.mode="whole"'):
        check_test_cfg('normal', model)


def test_task_inferencer_takes_an_exported_file_alone(exported):
    """``DenseInferencer('x.onnx')``: task and config from the file, the
    same depth as the eager model (1e-4: onnxruntime against PyTorch
    float32, as test_inferencer_runs_onnx_like_eager)."""
    img = image(70, 50, 3)
    onnx = DenseInferencer(exported['depth']['onnx'], device='cpu',
                           show_progress=False)
    assert onnx.exported and onnx.task == 'depth'
    eager = DenseInferencer(exported['depth']['cfg'],
                            exported['depth']['ckpt'], device='cpu',
                            show_progress=False)
    np.testing.assert_allclose(onnx(img)['predictions'][0],
                               eager(img)['predictions'][0], atol=1e-4)


SIZES = dict(pose=(64, 48), seg=(64, 48), normal=(64, 48),
             albedo=(64, 48), matting=(64, 48), pointmap=(256, 192))


def sapiens2_eager_output(task, model, cfg, images):
    """The eager model's raw output for a (N, 3, H, W) uint8 BGR batch, as
    the exported graph defines it (pose: flip-test heatmaps through mmpose's
    head.predict; pointmap: metric, canonical / scale)."""
    if task == 'pose':
        from mmpose.structures import PoseDataSample
        flip = pose_dataset_meta(cfg)['flip_indices']
        samples = [PoseDataSample(metainfo=dict(flip_indices=flip))
                   for _ in images]
        x = model.data_preprocessor(
            dict(inputs=list(images), data_samples=samples), False)['inputs']
        with torch.no_grad():
            feats = [model.extract_feat(x), model.extract_feat(x.flip(-1))]
            test_cfg = dict(model.test_cfg, output_heatmaps=True)
            _, fields = model.head.predict(feats, samples, test_cfg=test_cfg)
        return torch.stack([f.heatmaps for f in fields]).numpy()
    data = model.data_preprocessor(dict(inputs=list(images)), False)
    with torch.no_grad():
        out = model(data['inputs'], mode='tensor')
    if task == 'pointmap':
        out = model.decode_head.metric_pointmap(*out)
    return out.numpy()


@pytest.mark.slow
@pytest.mark.parametrize('task', sorted(LEAF))
def test_sapiens2_exported_matches_eager(tmp_path, task):
    torch.manual_seed(0)
    cfg = set_input_size(Config.fromfile(str(leaf(task, 'tiny'))),
                         SIZES[task])
    model = init_model(cfg)
    with torch.no_grad():  # outputs that vary across pixels and channels
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
        if task == 'pointmap':  # a positive scale: no clamping
            model.decode_head.scale_final_layer[-1].bias += 2.0
        if task == 'pose':  # positive heatmaps: a well-posed DARK step
            model.head.conv_pose.bias += 1.0
    ckpt = tmp_path / 'model.pth'
    torch.save(dict(state_dict=model.state_dict()), ckpt)
    files = export_model(cfg, str(ckpt), str(tmp_path), name=task)
    assert read_metadata(files['onnx'])['task'] == task
    rng = np.random.default_rng(0)
    runtimes = [ExportedModel(files['onnx']), ExportedModel(files['pt2'])]
    for batch in (1, 3):
        images = torch.from_numpy(rng.integers(
            0, 256, (batch, 3, *SIZES[task]), dtype=np.uint8))
        ref = sapiens2_eager_output(task, model, cfg, images)
        assert ref.std() > 1e-3  # a real comparison
        for runtime in runtimes:
            out = runtime(images.numpy().astype(np.float32))
            assert out.shape == ref.shape
            # fp32 graphs of the same ops: differences are rounding only
            assert np.abs(out - ref).max() < 1e-4, (task, batch,
                                                    runtime.path)


def test_pointmap_refuses_another_input_size():
    cfg = Config.fromfile(str(leaf('pointmap', 'tiny')))
    with pytest.raises(ValueError, match='only runs at 256x192'):
        set_input_size(cfg, (64, 48))


@pytest.mark.slow
def test_inferencer_runs_an_exported_sapiens2_model_like_eager(tmp_path):
    """The exported normal model through SapiensInferencer: padding crop,
    normalisation and resize as the eager estimator does them."""
    from sapiens_mm.apis import SapiensInferencer
    torch.manual_seed(0)
    cfg = set_input_size(Config.fromfile(str(leaf('normal', 'tiny'))),
                         (64, 48))
    model = init_model(cfg)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    ckpt = tmp_path / 'normal.pth'
    torch.save(dict(state_dict=model.state_dict()), ckpt)
    files = export_model(cfg, str(ckpt), str(tmp_path), formats='onnx',
                         name='normal')
    # a 50x70 image: ResizePadImage pads it to 64x48 (aspect kept)
    img = np.random.default_rng(1).integers(0, 256, (50, 70, 3), np.uint8)
    eager = SapiensInferencer({'normal': (cfg, str(ckpt))}, device='cpu')
    onnx = SapiensInferencer({'normal': files['onnx']}, device='cpu')
    [ref] = list(eager([img]))
    [out] = list(onnx([img]))
    ref, out = ref['predictions']['normal'], out['predictions']['normal']
    assert ref.shape == out.shape == (50, 70, 3)
    assert np.abs(out - ref).max() < 1e-4  # fp32 rounding of the graph
