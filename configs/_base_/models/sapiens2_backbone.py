# The Sapiens2 encoder as every Sapiens2 task model uses it: the official
# settings at 1024x768 (H x W), feature map output (B, C, 64, 48) without the
# CLS and register tokens. A leaf config sets arch / init_cfg from the size
# _base_ (configs/_base_/models/sapiens2_<size>.py).
sapiens2_backbone = dict(
    type='mmpretrain.Sapiens2VisionTransformer',
    arch='sapiens2_0.4b',
    img_size=(1024, 768),
    patch_size=16,
    out_type='featmap')
sapiens2_mean = [123.675, 116.28, 103.53]  # RGB
sapiens2_std = [58.395, 57.12, 57.375]
