"""ONNX and .pt2 export of every Sapiens2 task model (tiny arch, fp32):
one file with a dynamic batch, outputs equal to eager at batch 1 and 3."""
import numpy as np
import pytest
import torch
from mmengine.config import Config
from sapiens2_helpers import LEAF, leaf

from sapiens_mm.apis.inference import (init_model, pose_dataset_meta,
                                       set_input_size)
from sapiens_mm.deploy import ExportedModel, export_model, read_metadata

# pointmap: its scale branch fixes the size (256x192 for the tiny config)
SIZES = dict(pose=(64, 48), seg=(64, 48), normal=(64, 48),
             albedo=(64, 48), matting=(64, 48), pointmap=(256, 192))


def eager_output(task, model, cfg, images):
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
def test_exported_matches_eager(tmp_path, task):
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
        ref = eager_output(task, model, cfg, images)
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
