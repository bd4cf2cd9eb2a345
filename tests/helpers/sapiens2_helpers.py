"""Shared by the Sapiens2 config and training tests: the shipped config
paths and hand-made data samples with the targets each task's loss needs."""
from pathlib import Path

import numpy as np
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.structures import InstanceData, PixelData

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / 'configs' / 'sapiens2'
#: The Sapiens2 tasks with shipped configs: one folder each under
#: configs/sapiens2/ (fsdp/ holds training variants, not task folders).
LEAF = {
    d.name: d
    for d in sorted(CONFIGS.iterdir())
    if d.is_dir() and d.name not in ('fsdp', )
}


def leaf(task, size):
    """Path of the shipped config of ``task`` at ``size``: the one file of
    ``configs/sapiens2/<task>/`` named ``sapiens2_<size>-*.py`` (matting,
    under its official name: ``sapiens2_<size>_matting_*.py``) (found on
    disk, so a test comparing with the model zoo's answer checks the zoo
    against the config files, not against a copy of its own table)."""
    found = sorted(LEAF[task].glob(f'sapiens2_{size}-*.py')) + sorted(
        LEAF[task].glob(f'sapiens2_{size}_{task}_*.py'))
    assert len(found) == 1, (task, size, found)
    return found[0]


def dense_samples(task, H, W, n=2):
    """Hand-made data samples with the targets the loss needs."""
    from mmseg.structures import SegDataSample

    from sapiens_mm.utils.pointcloud import backproject
    rng = np.random.default_rng(0)
    samples = []
    for _ in range(n):
        s = SegDataSample(metainfo=dict(
            img_shape=(H, W), ori_shape=(H, W), pad_shape=(H, W),
            padding_size=[0, 0, 0, 0]))
        if task == 'seg':
            # four vertical bands of classes 0, 3, 14, 28
            bands = torch.tensor([0, 3, 14, 28])[torch.arange(W) * 4 // W]
            s.gt_sem_seg = PixelData(data=bands.expand(1, H, W).clone())
        elif task == 'normal':
            # a smooth field facing the camera: (x, y, -1), normalised
            y, x = torch.meshgrid(torch.linspace(-1, 1, H),
                                  torch.linspace(-1, 1, W), indexing='ij')
            s.gt_normal_map = PixelData(data=torch.nn.functional.normalize(
                torch.stack([x, y, -torch.ones_like(x)]), dim=0))
        elif task == 'matting':
            # alpha: a soft vertical edge; image, foreground, background
            alpha = torch.linspace(-1, 2, W).clamp(0, 1).expand(1, H, W)
            fg = torch.full((3, H, W), 0.8)
            bg = torch.full((3, H, W), 0.1)
            s.gt_matting = PixelData(data=torch.cat(
                [alpha, alpha * fg + (1 - alpha) * bg, fg, bg]))
        elif task == 'albedo':
            ramp = torch.linspace(0, 1, W).expand(H, W)
            s.gt_albedo_map = PixelData(
                data=torch.stack([ramp, 1 - ramp, torch.full_like(ramp,
                                                                  0.5)]))
        else:
            fx = 200.0
            K = np.array([[fx, 0, W / 2], [0, fx, H / 2], [0, 0, 1]])
            points = backproject(2.0 + rng.random((H, W)) * 0.1, K)
            scale = 192.0 / fx  # the tiny config's canonical focal
            s.gt_pointmap = PixelData(data=torch.from_numpy(
                points * scale).permute(2, 0, 1).float())
            s.set_metainfo(dict(pointmap_scale=scale,
                                pointmap_intrinsics=(fx, fx, W / 2, H / 2)))
        samples.append(s)
    return samples


def pose_samples(H, W, n=2):
    from mmpose.structures import PoseDataSample
    samples = []
    for _ in range(n):
        s = PoseDataSample(metainfo=dict(
            input_size=(W, H), input_center=np.array([W / 2, H / 2]),
            input_scale=np.array([W, H], dtype=np.float64),
            flip_indices=list(range(308)), img_shape=(H, W)))
        s.gt_fields = PixelData(heatmaps=torch.rand(308, H // 4, W // 4))
        s.gt_instance_labels = InstanceData(
            keypoint_weights=torch.ones(1, 308))
        s.gt_instances = InstanceData(
            bboxes=torch.tensor([[0.0, 0.0, W, H]]), bbox_scores=torch.ones(1))
        samples.append(s)
    return samples


def build_tiny(task):
    """The shipped tiny config of ``task`` and its model, initialised."""
    cfg = Config.fromfile(str(leaf(task, 'tiny')))
    init_default_scope(cfg.default_scope)
    if task == 'pose':
        from mmpose.registry import MODELS
    else:
        from mmseg.registry import MODELS
    model = MODELS.build(cfg.model)
    model.init_weights()
    return cfg, model


