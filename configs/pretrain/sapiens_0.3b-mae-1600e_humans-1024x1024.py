_base_ = [
    '../_base_/models/sapiens_0.3b.py',
    '../_base_/models/pretrain_mae_sapiens.py',
    '../_base_/datasets/pretrain_humans_1024.py',
    '../_base_/schedules/pretrain_mae_1600e.py',
    '../_base_/pretrain_runtime.py',
]
custom_imports = dict(imports=['sapiens_mm'], allow_failed_imports=False)

model = dict(
    backbone=dict(arch={{_base_.sapiens_arch}}),
    neck=dict(embed_dim={{_base_.sapiens_embed_dims}}))
