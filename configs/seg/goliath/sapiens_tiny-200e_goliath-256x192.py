# Tiny Sapiens-shaped model (64-wide, 2-layer encoder; 64-channel head) at
# 256x192 for tests and quick CPU runs, e.g. on the synthetic data. Same
# pipelines and schedule as the released sizes, scaled to the small input.
_base_ = [
    '../../_base_/models/sapiens_tiny.py',
    '../../_base_/models/seg_sapiens_vit.py',
    '../../_base_/datasets/seg_goliath.py',
    '../../_base_/schedules/seg_200e.py',
    '../../_base_/seg_runtime.py',
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
        deconv_out_channels=(64, 64, 64),
        conv_out_channels=(64, 64, 64),
    ))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(
        type='RandomBackground',
        prob=0.8,
        background_root={{_base_.background_root}}),
    dict(
        type='RandomResize',
        scale=(image_size[1], image_size[0]),
        ratio_range=(0.2, 2.0),
        keep_ratio=True),
    dict(type='RandomCrop', crop_size=image_size, cat_max_ratio=0.75),
    dict(
        type='Resize',
        scale=(image_size[1], image_size[0]),
        keep_ratio=False),
    dict(type='RandomRotate', prob=0.5, degree=45, seg_pad_val=0),
    dict(type='BodyPartRandomFlip', prob=0.5, vocab='goliath_28'),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='Resize',
        scale=(image_size[1], image_size[0]),
        keep_ratio=False),
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
