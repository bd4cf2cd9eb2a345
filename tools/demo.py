"""The project's main job (``make demo``).

Until the synthetic-data demo lands this is a smoke run: build the Sapiens
backbone from a shipped config, run one real photograph through it and print
what it produced.
"""
import argparse
import time
from pathlib import Path

import numpy as np
import torch
from mmengine.config import Config

import sapiens_mm  # noqa: F401
from mmpretrain.registry import MODELS

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--arch-config', default=str(
        ROOT / 'configs/_base_/models/sapiens_tiny.py'),
        help='size config to build the backbone from')
    args = parser.parse_args(argv)
    start = time.time()
    size_cfg = Config.fromfile(args.arch_config)
    backbone = MODELS.build(dict(type='SapiensVisionTransformer',
                                 arch=size_cfg.sapiens_arch))
    backbone.init_weights()
    backbone.eval()

    from skimage import data
    image = data.astronaut()  # 512x512 RGB photograph shipped by scikit-image
    x = torch.from_numpy(image).permute(2, 0, 1)[None].float()
    x = torch.nn.functional.interpolate(x, size=(1024, 768), mode='bilinear')
    mean = torch.tensor([123.675, 116.28, 103.53]).view(1, 3, 1, 1)
    std = torch.tensor([58.395, 57.12, 57.375]).view(1, 3, 1, 1)
    with torch.no_grad():
        feat = backbone((x - mean) / std)[0]
    print(f'backbone {size_cfg.sapiens_arch}: '
          f'{sum(p.numel() for p in backbone.parameters()) / 1e6:.2f} M params')
    print(f'input {tuple(x.shape)} -> features {tuple(feat.shape)}, '
          f'mean {feat.mean():.4f}, std {feat.std():.4f}, '
          f'finite {bool(np.isfinite(feat.numpy()).all())}')
    print(f'done in {time.time() - start:.1f} s')


if __name__ == '__main__':
    main()
