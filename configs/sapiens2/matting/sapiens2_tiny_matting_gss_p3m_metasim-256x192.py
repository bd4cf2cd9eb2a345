# Tiny Sapiens2-shaped matting model (2-layer, 64-wide encoder; small head)
# at 256x192 for tests and quick CPU runs, e.g. on the synthetic data. Same
# recipe as the 1b config, pipelines scaled to the small input.
_base_ = [
    '../../_base_/models/sapiens2_tiny.py',
    '../../_base_/models/matting_sapiens2.py',
    '../../_base_/datasets/matting_folder.py',
    '../../_base_/schedules/sapiens2_iter.py',
    '../../_base_/sapiens2_dense_runtime.py',
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
        upsample_channels={{_base_.sapiens2_matting_upsample_channels}},
        conv_out_channels={{_base_.sapiens2_matting_conv_channels}}))
train_dataloader = dict(batch_size={{_base_.sapiens2_matting_batch_size}})
train_cfg = dict(max_iters={{_base_.sapiens2_matting_iters}})
optim_wrapper = dict(
    optimizer=dict(lr={{_base_.sapiens2_matting_lr}}),
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
        end={{_base_.sapiens2_matting_iters}}),
]
default_hooks = dict(checkpoint=dict(save_best='matting/sad', rule='less'))
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadMattingAnnotations'),
    dict(
        type='RandomResize',
        scale=(image_size[1], image_size[0]),
        ratio_range=(0.5, 2.0),
        keep_ratio=True,
        resize_type='MattingResize'),
    dict(type='RandomCrop', crop_size=image_size),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='MattingResize', scale=(image_size[1], image_size[0]),
         keep_ratio=False),
    dict(type='GenerateMattingTarget'),
    dict(type='PackDenseInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='AreaCubicResize',
        scale=(image_size[1], image_size[0]),
        keep_ratio=False),
    dict(type='LoadMattingAnnotations'),
    dict(type='PackDenseInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
