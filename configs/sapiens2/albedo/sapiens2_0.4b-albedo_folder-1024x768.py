# Sapiens2 albedo (no official checkpoint is released); the official recipe.
_base_ = [
    '../../_base_/models/sapiens2_0.4b.py',
    '../../_base_/models/albedo_sapiens2.py',
    '../../_base_/datasets/albedo_folder.py',
    '../../_base_/schedules/sapiens2_iter.py',
    '../../_base_/sapiens2_dense_runtime.py',
]
# Every size variant of this file differs only by the first _base_ line.
model = dict(
    backbone=dict(
        arch={{_base_.sapiens2_arch}},
        init_cfg={{_base_.sapiens2_pretrained}}),
    decode_head=dict(
        in_channels={{_base_.sapiens2_embed_dims}},
        upsample_channels={{_base_.sapiens2_albedo_upsample_channels}},
        conv_out_channels={{_base_.sapiens2_albedo_conv_channels}}))
train_dataloader = dict(batch_size={{_base_.sapiens2_albedo_batch_size}})
train_cfg = dict(max_iters={{_base_.sapiens2_albedo_iters}})
optim_wrapper = dict(
    optimizer=dict(lr={{_base_.sapiens2_albedo_lr}}),
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
        end={{_base_.sapiens2_albedo_iters}}),
]
default_hooks = dict(checkpoint=dict(save_best='albedo/mae', rule='less'))
