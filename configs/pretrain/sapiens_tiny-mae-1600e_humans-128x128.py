# Quick-run variant for tests and CPU smoke runs: the tiny encoder (64 wide,
# 2 layers), 128x128 crops (8x8 patches) and a small decoder. Everything else
# (mask ratio, loss, optimizer, schedule) is the official setting.
_base_ = [
    '../_base_/models/sapiens_tiny.py',
    '../_base_/models/pretrain_mae_sapiens.py',
    '../_base_/datasets/pretrain_humans_1024.py',
    '../_base_/schedules/pretrain_mae_1600e.py',
    '../_base_/pretrain_runtime.py',
]
custom_imports = dict(imports=['sapiens_mm'], allow_failed_imports=False)

model = dict(
    backbone=dict(arch={{_base_.sapiens_arch}}, img_size=128),
    neck=dict(
        embed_dim={{_base_.sapiens_embed_dims}},
        num_patches=64,
        decoder_embed_dim=64,
        decoder_depth=2,
        decoder_num_heads=4))

train_dataloader = dict(
    batch_size=8,
    num_workers=2,
    dataset=dict(pipeline=[
        dict(
            type='RandomResizedCrop',
            scale=128,
            crop_ratio_range=(0.2, 1.0),
            backend='pillow',
            interpolation='bicubic'),
        dict(type='RandomFlip', prob=0.5),
        dict(type='PackInputs'),
    ]))
