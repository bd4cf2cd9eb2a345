"""Shared pieces of the inference tests: small task configs, test images,
well-posed pose heatmaps and little videos."""
import cv2
import numpy as np
import torch
from mmengine.config import Config

from tiny_configs import TINY

__all__ = ['small_cfg', 'image', 'peaked_heatmaps', 'well_posed',
           'write_video', 'count_frames']


def small_cfg(task, hw=(64, 48), path=None):
    """The tiny config of ``task`` (or the config file ``path`` of that
    task) at an (H, W) = ``hw`` input."""
    cfg = Config.fromfile(str(path or TINY[task]))
    h, w = hw
    cfg.model.backbone.img_size = (h, w)
    pipeline = cfg.test_dataloader.dataset.pipeline
    if task == 'pose':
        codec = dict(type='UDPHeatmap', input_size=(w, h),
                     heatmap_size=(w // 4, h // 4), sigma=2)
        cfg.model.head.decoder = codec
        for step in pipeline:
            if step['type'] == 'TopdownAffine':
                step['input_size'] = (w, h)
    else:
        cfg.model.data_preprocessor.size = (h, w)
        for step in pipeline:
            if step['type'] == 'Resize':
                step['scale'] = (w, h)
    return cfg


def image(h, w, seed):
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    return cv2.GaussianBlur(img, (5, 5), 0)


def peaked_heatmaps(hm_h=16, hm_w=12, k=308, sigma=1.5):
    """(K, h, w) Gaussians of height 1 at distinct sub-pixel points: heatmaps
    with one clear peak each, where the argmax and the DARK refinement are
    well-posed (a 1e-6 change moves a keypoint by about 1e-6 px)."""
    idx = torch.arange(k, dtype=torch.float32)
    px = 1.5 + (idx * 7.3) % (hm_w - 3)
    py = 1.5 + (idx * 5.1) % (hm_h - 3)
    ys, xs = torch.meshgrid(torch.arange(hm_h).float(),
                            torch.arange(hm_w).float(), indexing='ij')
    return torch.exp(-((xs - px.view(-1, 1, 1))**2 +
                       (ys - py.view(-1, 1, 1))**2) / (2 * sigma**2))


def well_posed(model, monkeypatch):
    """Make a pose model's heatmaps well posed: one clear peak per keypoint
    plus 1 % of the model's own output (which still decides the exact
    positions), no flip test (it would mirror the peaks), as in
    tests/apis/test_inferencer.py's test_batch_equals_one_by_one. Random weights give flat
    heatmaps whose sub-pixel refinement moves with float32 rounding."""
    monkeypatch.setitem(model.test_cfg, 'flip_test', False)
    head_forward, peaks = model.head.forward, peaked_heatmaps(64, 48)
    monkeypatch.setattr(model.head, 'forward',
                        lambda feats: peaks + 0.01 * head_forward(feats))


def write_video(path, n, size=(64, 48), fps=7.0):
    w, h = size
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*'mp4v'), fps,
                             (w, h))
    assert writer.isOpened()
    for i in range(n):
        writer.write(image(h, w, 10 + i))
    writer.release()


def count_frames(path):
    cap = cv2.VideoCapture(str(path))
    fps = cap.get(cv2.CAP_PROP_FPS)
    n = 0
    while cap.read()[0]:
        n += 1
    cap.release()
    return n, fps
