_base_ = [
    '../_base_/models/sapiens_0.3b.py',
    '../_base_/models/normal_sapiens_vit.py',
    '../_base_/datasets/normal_folder.py',
    '../_base_/schedules/dense_200e.py',
    '../_base_/dense_runtime.py',
]
# Every size variant of this file differs only by the first _base_ line.
model = dict(
    backbone=dict(
        arch={{_base_.sapiens_arch}},
        init_cfg={{_base_.sapiens_pretrained}}),
    decode_head=dict(in_channels={{_base_.sapiens_embed_dims}}))
default_hooks = dict(checkpoint=dict(save_best='normal/mean', rule='less'))
