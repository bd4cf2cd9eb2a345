"""ONNX and .pt2 export of the tiny matting model: one file with a dynamic
batch, outputs equal to eager at batch 1 and 3."""
from pathlib import Path

import numpy as np
import pytest
import torch
from mmengine.config import Config

from sapiens_mm.apis.inference import init_model, set_input_size
from sapiens_mm.deploy import ExportedModel, export_model, read_metadata

ROOT = Path(__file__).resolve().parents[2]
MATTING = ROOT / ('configs/sapiens2/matting/'
                  'sapiens2_tiny_matting_gss_p3m_metasim-256x192.py')


@pytest.mark.slow
def test_exported_matting_matches_eager(tmp_path):
    torch.manual_seed(0)
    cfg = set_input_size(Config.fromfile(str(MATTING)), (64, 48))
    model = init_model(cfg)
    with torch.no_grad():  # a matte that varies across pixels
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
        model.decode_head.conv_matting.weight.mul_(20.0)
    ckpt = tmp_path / 'model.pth'
    torch.save(dict(state_dict=model.state_dict()), ckpt)
    files = export_model(cfg, str(ckpt), str(tmp_path), name='matting')
    meta = read_metadata(files['onnx'])
    assert meta['task'] == 'matting'
    rng = np.random.default_rng(0)
    runtimes = [ExportedModel(files['onnx']), ExportedModel(files['pt2'])]
    for batch in (1, 3):
        images = torch.from_numpy(rng.integers(0, 256, (batch, 3, 64, 48),
                                               dtype=np.uint8))
        data = model.data_preprocessor(dict(inputs=list(images)), False)
        with torch.no_grad():
            ref = model(data['inputs'], mode='tensor').numpy()
        assert ref.shape == (batch, 4, 64, 48) and ref.std() > 1e-2
        for runtime in runtimes:
            out = runtime(images.numpy().astype(np.float32))
            # fp32 graphs of the same ops: differences are rounding only
            # (measured up to 1.2e-5 with these amplified logits; the
            # other tasks' export tests allow 1e-4 as well)
            assert np.abs(out - ref).max() < 1e-4, (batch, runtime.path)
