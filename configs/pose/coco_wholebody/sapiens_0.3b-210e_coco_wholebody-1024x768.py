# Sapiens-0.3b top-down pose on COCO-WholeBody at 1024x768, official recipe.
# Size variants differ by the first _base_ line and the official per-size
# lr / decay rate / loss lines below.
_base_ = [
    '../../_base_/models/sapiens_0.3b.py',
    '../../_base_/models/pose_sapiens_vit.py',
    '../../_base_/datasets/pose_coco_wholebody.py',
    '../../_base_/schedules/pose_210e.py',
    '../../_base_/pose_runtime.py',
]
model = dict(
    backbone=dict(
        arch={{_base_.sapiens_arch}},
        init_cfg={{_base_.sapiens_pretrained}}),
    head=dict(
        in_channels={{_base_.sapiens_embed_dims}},
        out_channels={{_base_.num_keypoints}},
        decoder={{_base_.codec}}))
# Official COCO-WholeBody 0.3b recipe: lr 5e-4, layer decay 0.75,
# KeypointMSELoss.
optim_wrapper = dict(
    optimizer=dict(lr=5e-4), paramwise_cfg=dict(layer_decay_rate=0.75))
