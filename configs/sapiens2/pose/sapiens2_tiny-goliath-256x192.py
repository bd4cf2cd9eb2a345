# Tiny Sapiens2-shaped pose model (2-layer, 64-wide encoder; small head) at
# 256x192 for tests and quick CPU runs, e.g. on the synthetic data. Same
# recipe as the released sizes, pipelines scaled to the small input.
_base_ = [
    '../../_base_/models/sapiens2_tiny.py',
    '../../_base_/models/pose_sapiens2.py',
    '../../_base_/datasets/pose_goliath_sapiens2.py',
    '../../_base_/schedules/sapiens2_iter.py',
    '../../_base_/sapiens2_pose_runtime.py',
]
image_size = (256, 192)  # (H, W)
# UDP heatmaps at 1/4 of 256x192; sigma 2 is the usual value for 256.
codec = dict(
    type='UDPHeatmap', input_size=(192, 256), heatmap_size=(48, 64), sigma=2)
model = dict(
    backbone=dict(
        arch={{_base_.sapiens2_arch}},
        img_size=image_size,
        init_cfg={{_base_.sapiens2_pretrained}}),
    head=dict(
        in_channels={{_base_.sapiens2_embed_dims}},
        out_channels={{_base_.num_keypoints}},
        deconv_out_channels={{_base_.sapiens2_pose_deconv_channels}},
        conv_out_channels={{_base_.sapiens2_pose_conv_channels}},
        decoder=codec))
train_dataloader = dict(batch_size={{_base_.sapiens2_pose_batch_size}})
train_cfg = dict(max_iters={{_base_.sapiens2_pose_iters}})
optim_wrapper = dict(
    optimizer=dict(lr={{_base_.sapiens2_pose_lr}}),
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
        end={{_base_.sapiens2_pose_iters}}),
]
train_pipeline = [
    dict(type='LoadImage'),
    dict(type='GetBBoxCenterScale', padding=1.25),
    dict(type='RandomFlip', direction='horizontal', prob=0.5),
    dict(type='RandomHalfBody', prob=0.3),
    dict(type='RandomBBoxTransform'),
    dict(type='TopdownAffine', input_size=codec['input_size'], use_udp=True),
    dict(type='GenerateTarget', encoder=codec),
    dict(type='PackPoseInputs'),
]
val_pipeline = [
    dict(type='LoadImage'),
    dict(type='GetBBoxCenterScale', padding=1.25),
    dict(type='Sapiens2TopdownAffine', input_size=codec['input_size'],
         use_udp=True),
    dict(type='PackPoseInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=val_pipeline))
test_dataloader = val_dataloader
