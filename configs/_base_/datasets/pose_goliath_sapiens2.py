# Goliath 308-keypoint data (the v1 layout, see pose_goliath.py) with the
# official Sapiens2 pipelines at 1024x768 and the same UDP codec (sigma 6,
# heatmaps 256x192). Not included: the official Albumentation step (Blur /
# MedianBlur p 0.1, CoarseDropout of 1 hole of 0.2-0.4 at p 1), which needs
# the optional `albumentations` package; add dict(type='Albumentation',
# transforms=[...]) before GenerateTarget if it is installed.
_base_ = ['./pose_goliath.py']
train_pipeline = [
    dict(type='LoadImage'),
    dict(type='GetBBoxCenterScale', padding=1.25),
    dict(type='RandomFlip', direction='horizontal', prob=0.5),
    dict(
        type='RandomHalfBody',
        min_total_keypoints=9,
        min_upper_keypoints=2,
        min_lower_keypoints=3,
        padding=1.5,
        prob=0.3),
    dict(
        type='RandomBBoxTransform',
        shift_factor=0.16,
        shift_prob=0.3,
        scale_factor=(0.5, 1.5),
        rotate_factor=80,
        rotate_prob=0.6),
    dict(type='TopdownAffine', input_size={{_base_.codec.input_size}},
         use_udp=True),
    dict(type='RandomApply', transforms=[dict(type='PhotometricDistortion')],
         prob=0.8),
    dict(type='GenerateTarget', encoder={{_base_.codec}}),
    dict(type='PackPoseInputs'),
]
# Official crop interpolation: INTER_AREA when shrinking, else INTER_CUBIC.
val_pipeline = [
    dict(type='LoadImage'),
    dict(type='GetBBoxCenterScale', padding=1.25),
    dict(type='Sapiens2TopdownAffine', input_size={{_base_.codec.input_size}},
         use_udp=True),
    dict(type='PackPoseInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=val_pipeline))
test_dataloader = val_dataloader
