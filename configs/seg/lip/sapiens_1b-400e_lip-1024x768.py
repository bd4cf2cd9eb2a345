_base_ = [
    '../../_base_/models/sapiens_1b.py',
    '../../_base_/models/seg_sapiens_vit.py',
    '../../_base_/datasets/seg_lip.py',
    '../../_base_/schedules/seg_400e.py',
    '../../_base_/seg_runtime.py',
]
# Every size variant of this file differs only by the first _base_ line.
model = dict(
    backbone=dict(
        arch={{_base_.sapiens_arch}},
        patch_cfg=dict(padding=2),
        init_cfg={{_base_.sapiens_pretrained}}),
    decode_head=dict(
        in_channels={{_base_.sapiens_embed_dims}},
        num_classes=20,
        loss_decode=dict(class_weight='lip_cihp_20')))
