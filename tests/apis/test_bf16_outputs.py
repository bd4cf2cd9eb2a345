"""bf16 inference against fp32 on every task's outputs: keypoints in
pixels, segmentation labels, depth and normals.

The tiny configs with head size 64 (the released models' size, so bf16
attention runs the CPU kernel where the CPU has AVX512_BF16), the same
random weights in both precisions, one image. bf16 keeps 8 significant
bits (relative rounding 2^-9 = 0.2 %); two encoder layers and a head add a
few such roundings, so the dense outputs may move by about 1 % of their
range, and only labels whose top-2 logit margin is above 2 % of the logit
range can be required to agree.
"""
import numpy as np
import pytest
import torch
from inference_helpers import image, peaked_heatmaps, small_cfg

from sapiens_mm.apis import SapiensInferencer


def hd64(task):
    """The tiny config of ``task`` with 2 heads of 64 channels."""
    cfg = small_cfg(task)
    cfg.model.backbone.arch = dict(embed_dims=128, num_layers=2,
                                   num_heads=2, feedforward_channels=256)
    head = cfg.model.head if task == 'pose' else cfg.model.decode_head
    head.in_channels = 128
    return cfg


@pytest.fixture(scope='module')
def pair():
    torch.manual_seed(0)
    tasks = ('pose', 'seg', 'depth', 'normal')
    fp32 = SapiensInferencer({t: hd64(t) for t in tasks}, device='cpu',
                             detector='none', dtype='fp32')
    bf16 = SapiensInferencer({t: hd64(t) for t in tasks}, device='cpu',
                             detector='none', dtype='bf16')
    for t in tasks:
        bf16.models[t].load_state_dict(fp32.models[t].state_dict())
    return fp32, bf16


def test_bf16_outputs_match_fp32_within_bf16_rounding(pair, monkeypatch):
    fp32, bf16 = pair
    for inf in pair:  # one clear peak per keypoint plus the model's 1 %
        model = inf.models['pose']
        monkeypatch.setitem(model.test_cfg, 'flip_test', False)
        monkeypatch.setattr(
            model.head, 'forward',
            lambda feats, f=model.head.forward: peaked_heatmaps() +
            0.01 * f(feats).float())
    img = image(70, 50, 5)
    box = np.array([[2, 3, 46, 66]])
    (a, ) = fp32(img, bboxes=box, return_datasamples=True)
    (b, ) = bf16(img, bboxes=box, return_datasamples=True)
    pa, pb = a['predictions'], b['predictions']
    # keypoints: the peaks decide, bf16 moves the model's share
    kpt_err = np.abs(pa['pose']['keypoints'] -
                     pb['pose']['keypoints']).max()
    assert kpt_err < 0.01  # px in a 50x70 image (measured 7e-4)
    # seg: labels agree wherever fp32's top-2 margin clears bf16 noise
    logits = a['datasamples']['seg'].seg_logits.data.float()
    top2 = logits.topk(2, dim=0).values
    margin = 0.02 * float(logits.max() - logits.min())
    clear = (top2[0] - top2[1] > margin).numpy()
    assert clear.mean() > 0.5
    np.testing.assert_array_equal(pa['seg'][clear], pb['seg'][clear])
    # depth / normals (NaN outside the seg foreground; compare where both
    # have values)
    for task in ('depth', 'normal'):
        x, y = pa[task], pb[task]
        both = np.isfinite(x) & np.isfinite(y)
        assert both.mean() > 0.3
        span = float(np.nanmax(x) - np.nanmin(x)) or 1.0
        err = np.abs(x[both] - y[both])
        # measured: depth 0.5 % (99th percentile) / 0.9 % (max) of the
        # span, normals 1.2 % / 4.8 % (where the unnormalised vector is
        # short, normalising amplifies the rounding)
        assert np.percentile(err, 99) < 0.02 * span, task
        if task == 'depth':
            assert err.max() < 0.02 * span
    n = both[..., 0] if pa['normal'].ndim == 3 else both
    cos = (pa['normal'][n] * pb['normal'][n]).sum(-1).clip(-1, 1)
    angle = np.degrees(np.arccos(cos))  # measured: median 0.4, 99th 2.1
    assert np.median(angle) < 1.0 and np.percentile(angle, 99) < 5.0
