# Goliath 308-keypoint data in COCO keypoint format, read by GoliathDataset:
#   <data_root>/<split>/images/<file_name>
#   <data_root>/<split>/annotations/goliath_308.json  (3 x 308 `keypoints`)
# The synthetic generator (sapiens_mm.datasets.synthetic) writes this layout.
# The metainfo (names, flip pairs, sigmas, groups) is package data.
_base_ = ['./pose_topdown_1024x768.py']
dataset_type = 'GoliathDataset'
data_root = 'data/goliath/'
num_keypoints = 308
train_dataloader = dict(
    batch_size=4,  # per GPU, as in the official launch scripts
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        data_mode='topdown',
        ann_file='train/annotations/goliath_308.json',
        data_prefix=dict(img='train/images/'),
        pipeline={{_base_.train_pipeline}}))
val_dataloader = dict(
    batch_size=32,
    num_workers=4,
    persistent_workers=True,
    drop_last=False,
    sampler=dict(type='DefaultSampler', shuffle=False, round_up=False),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        data_mode='topdown',
        ann_file='val/annotations/goliath_308.json',
        data_prefix=dict(img='val/images/'),
        test_mode=True,
        pipeline={{_base_.val_pipeline}}))
test_dataloader = val_dataloader
# OKS AP/AR on all 308 keypoints and per group (body, foot, face, hands,
# extra). Pointing the test set at COCO-WholeBody annotations evaluates the
# 53 keypoints both layouts share (see the *-goliath_on_coco_wholebody configs).
val_evaluator = dict(
    type='GoliathMetric',
    ann_file=data_root + 'val/annotations/goliath_308.json')
test_evaluator = val_evaluator
