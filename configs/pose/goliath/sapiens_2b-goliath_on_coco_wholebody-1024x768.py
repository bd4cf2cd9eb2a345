# Evaluate a Sapiens-2b Goliath (308-keypoint) model on COCO-WholeBody
# val: OKS AP/AR over the 53 keypoints both layouts share (17 body, 6 foot,
# 15 per hand), overall and per group. For tools/test.py only.
_base_ = ['./sapiens_2b-210e_goliath-1024x768.py']
coco_root = 'data/coco/'
test_dataloader = dict(
    dataset=dict(
        data_root=coco_root,
        ann_file='annotations/coco_wholebody_val_v1.0.json',
        # detected person boxes; set bbox_file=None for ground-truth boxes
        bbox_file=coco_root +
        'person_detection_results/COCO_val2017_detections_AP_H_70_person.json',
        data_prefix=dict(img='val2017/')))
test_evaluator = dict(
    ann_file=coco_root + 'annotations/coco_wholebody_val_v1.0.json')
