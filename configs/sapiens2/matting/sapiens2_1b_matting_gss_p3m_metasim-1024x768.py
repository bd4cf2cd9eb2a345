# Sapiens2 1b human matting: the released facebook/sapiens2-matting-1b
# (sapiens2_1b_matting.safetensors, official or Transformers layout) under
# its official config name. The official training recipe and losses are not
# public: the recipe here is the 1b normal one, the losses ours.
_base_ = [
    '../../_base_/models/sapiens2_1b.py',
    '../../_base_/models/matting_sapiens2.py',
    '../../_base_/datasets/matting_folder.py',
    '../../_base_/schedules/sapiens2_iter.py',
    '../../_base_/sapiens2_dense_runtime.py',
]
model = dict(
    backbone=dict(
        arch={{_base_.sapiens2_arch}},
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
