# Tiny Sapiens2-shaped seg model (2-layer, 64-wide encoder; small head) at
# 256x192 for tests and quick CPU runs, e.g. on the synthetic data. Same
# recipe as the released sizes, pipelines scaled to the small input.
_base_ = [
    '../../_base_/models/sapiens2_tiny.py',
    '../../_base_/models/seg_sapiens2.py',
    '../../_base_/datasets/seg_dome29.py',
    '../../_base_/schedules/sapiens2_iter.py',
    '../../_base_/sapiens2_seg_runtime.py',
]
image_size = (256, 192)  # (H, W)
model = dict(
    data_preprocessor=dict(size=image_size),
    backbone=dict(
        arch={{_base_.sapiens2_arch}},
        img_size=image_size,
        init_cfg={{_base_.sapiens2_pretrained}}),
    decode_head=dict(
        in_channels={{_base_.sapiens2_embed_dims}},
        channels=16,
        deconv_out_channels=(32, 32, 16, 16),
        conv_out_channels=(16, 16)))
train_dataloader = dict(batch_size={{_base_.sapiens2_seg_batch_size}})
train_cfg = dict(max_iters={{_base_.sapiens2_seg_iters}})
optim_wrapper = dict(
    optimizer=dict(lr={{_base_.sapiens2_seg_lr}}),
    paramwise_cfg=dict(
        layer_decay_rate={{_base_.sapiens2_layer_decay_rate}},
        num_layers={{_base_.sapiens2_num_layers}}),
    clip_grad=dict(max_norm={{_base_.sapiens2_clip_grad}}))
param_scheduler = [
    dict(
        type='LinearLR',
        start_factor=1e-3,
        by_epoch=False,
        begin=0,
        end={{_base_.warmup_iters}}),
    dict(
        type='PolyLR',
        power=1.0,
        eta_min=0.0,
        by_epoch=False,
        begin={{_base_.warmup_iters}},
        end={{_base_.sapiens2_seg_iters}}),
]
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
        ratio_range=(0.4, 2.0),
        keep_ratio=True),
    dict(
        type='RandomApply',
        transforms=[
            dict(type='RandomCrop', crop_size=image_size, cat_max_ratio=0.75)
        ],
        prob=0.3),
    dict(type='mmpretrain.GaussianBlur', magnitude_range=(0.1, 2.0),
         prob=0.3),
    dict(type='RandomGaussianNoise', prob=0.3),
    dict(type='RandomRotate', prob=0.5, degree=60, seg_pad_val=0),
    dict(type='BodyPartRandomFlip', prob=0.5, vocab='dome_29'),
    dict(type='PhotoMetricDistortion'),
    dict(
        type='Resize',
        scale=(image_size[1], image_size[0]),
        keep_ratio=False),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='AreaCubicResize',
        scale=(image_size[1], image_size[0]),
        keep_ratio=False),
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
