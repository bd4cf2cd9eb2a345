# Tiny Sapiens-shaped model (64-wide, 2-layer encoder; 64-channel head) at
# 256x192 for tests and quick CPU runs, e.g. on the synthetic data. Same
# pipelines and schedule as the released sizes, scaled to the small input.
_base_ = [
    '../_base_/models/sapiens_tiny.py',
    '../_base_/models/depth_sapiens_vit.py',
    '../_base_/datasets/depth_folder.py',
    '../_base_/schedules/dense_200e.py',
    '../_base_/dense_runtime.py',
]
image_size = (256, 192)  # (H, W)
model = dict(
    data_preprocessor=dict(size=image_size),
    backbone=dict(
        arch={{_base_.sapiens_arch}},
        img_size=image_size,
        init_cfg={{_base_.sapiens_pretrained}}),
    decode_head=dict(
        in_channels={{_base_.sapiens_embed_dims}},
        channels=64,
        deconv_out_channels=(64, 64, 64, 64),
        conv_out_channels=(64, 64)))
default_hooks = dict(checkpoint=dict(save_best='depth/abs_rel', rule='less'))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadDenseAnnotations'),
    dict(
        type='RandomResize',
        scale=(image_size[1], image_size[0]),
        ratio_range=(0.2, 2.0),
        keep_ratio=True),
    dict(type='RandomCrop', crop_size=image_size),
    dict(type='Resize', scale=(image_size[1], image_size[0]), keep_ratio=False),
    dict(type='DenseRandomRotate', prob=0.5, degree=60),
    dict(type='DenseRandomFlip', prob=0.5),
    dict(type='GenerateDepthTarget'),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackDenseInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(image_size[1], image_size[0]), keep_ratio=False),
    dict(type='LoadDenseAnnotations'),
    dict(type='GenerateDepthTarget', normalize=False),
    dict(type='PackDenseInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
