# COCO 17-keypoint person data (mmpose's CocoDataset and CocoMetric, with the
# annotation files checked: CheckedCocoDataset, CheckedCocoMetric):
#   <data_root>/train2017/, <data_root>/val2017/
#   <data_root>/annotations/person_keypoints_{train,val}2017.json
#   <data_root>/person_detection_results/
#       COCO_val2017_detections_AP_H_70_person.json  (Sapiens release)
_base_ = ['./pose_topdown_1024x768.py']
dataset_type = 'CheckedCocoDataset'
data_root = 'data/coco/'
num_keypoints = 17
train_dataloader = dict(
    batch_size=4,  # per GPU, as in the official launch scripts
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        data_mode='topdown',
        ann_file='annotations/person_keypoints_train2017.json',
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
        ann_file='annotations/person_keypoints_val2017.json',
        # detected person boxes; set bbox_file=None for ground-truth boxes
        bbox_file=data_root +
        'person_detection_results/COCO_val2017_detections_AP_H_70_person.json',
        data_prefix=dict(img='val2017/'),
        test_mode=True,
        pipeline={{_base_.val_pipeline}}))
test_dataloader = val_dataloader
val_evaluator = dict(
    type='CheckedCocoMetric',
    ann_file=data_root + 'annotations/person_keypoints_val2017.json')
test_evaluator = val_evaluator
