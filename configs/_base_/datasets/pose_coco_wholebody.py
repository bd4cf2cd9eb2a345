# COCO-WholeBody 133-keypoint data (mmpose's CocoWholeBodyDataset and
# CocoWholeBodyMetric, with the annotation files checked:
# CheckedCocoWholeBodyDataset, CheckedCocoWholeBodyMetric): COCO images with
#   <data_root>/annotations/coco_wholebody_{train,val}_v1.0.json
#   <data_root>/person_detection_results/
#       COCO_val2017_detections_AP_H_70_person.json  (Sapiens release)
_base_ = ['./pose_topdown_1024x768.py']
dataset_type = 'CheckedCocoWholeBodyDataset'
data_root = 'data/coco/'
num_keypoints = 133
train_dataloader = dict(
    batch_size=4,  # per GPU, as in the official launch scripts
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        data_mode='topdown',
        ann_file='annotations/coco_wholebody_train_v1.0.json',
        data_prefix=dict(img='train2017/'),
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
        ann_file='annotations/coco_wholebody_val_v1.0.json',
        # detected person boxes; set bbox_file=None for ground-truth boxes
        bbox_file=data_root +
        'person_detection_results/COCO_val2017_detections_AP_H_70_person.json',
        data_prefix=dict(img='val2017/'),
        test_mode=True,
        pipeline={{_base_.val_pipeline}}))
test_dataloader = val_dataloader
val_evaluator = dict(
    type='CheckedCocoWholeBodyMetric',
    ann_file=data_root + 'annotations/coco_wholebody_val_v1.0.json')
test_evaluator = val_evaluator
