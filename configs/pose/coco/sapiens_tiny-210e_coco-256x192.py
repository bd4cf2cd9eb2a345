# Tiny Sapiens-shaped model (64-wide, 2-layer encoder; 64-channel head) at
# 256x192 for tests and quick CPU runs, e.g. on the synthetic data. Same
# pipelines and schedule as the released sizes, scaled to the small input.
_base_ = [
    '../../_base_/models/sapiens_tiny.py',
    '../../_base_/models/pose_sapiens_vit.py',
    '../../_base_/datasets/pose_coco.py',
    '../../_base_/schedules/pose_210e.py',
    '../../_base_/pose_runtime.py',
]
# UDP heatmaps at 1/4 of 256x192; sigma 2 is the official value for 256.
codec = dict(
    type='UDPHeatmap', input_size=(192, 256), heatmap_size=(48, 64), sigma=2)
model = dict(
    backbone=dict(
        arch={{_base_.sapiens_arch}},
        img_size=(256, 192),
        init_cfg={{_base_.sapiens_pretrained}}),
    head=dict(
        in_channels={{_base_.sapiens_embed_dims}},
        out_channels={{_base_.num_keypoints}},
        deconv_out_channels=(64, 64),
        conv_out_channels=(64, 64),
        decoder=codec))
train_pipeline = [
    dict(type='LoadImage'),
    dict(type='GetBBoxCenterScale'),
    dict(type='RandomFlip', direction='horizontal'),
    dict(type='RandomHalfBody'),
    dict(type='RandomBBoxTransform'),
    dict(type='TopdownAffine', input_size=codec['input_size'], use_udp=True),
    dict(type='PhotometricDistortion'),
    dict(type='GenerateTarget', encoder=codec),
    dict(type='PackPoseInputs'),
]
val_pipeline = [
    dict(type='LoadImage'),
    dict(type='GetBBoxCenterScale'),
    dict(type='TopdownAffine', input_size=codec['input_size'], use_udp=True),
    dict(type='PackPoseInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=val_pipeline))
test_dataloader = val_dataloader
optim_wrapper = dict(
    optimizer=dict(lr=5e-4), paramwise_cfg=dict(layer_decay_rate=0.85))
