# RTMDet-m person detector of the official Sapiens pose pipeline (mmdet;
# weights: the registry model `rtmdet-m-person`,
# facebook/sapiens-pose-bbox-detector,
# rtmdet_m_8xb32-100e_coco-obj365-person-235e8209.pth, Apache-2.0). One
# class; sapiens_mm applies its own score threshold and NMS to the boxes.
_base_ = 'mmdet::rtmdet/rtmdet_m_8xb32-300e_coco.py'

model = dict(
    # the whole detector's weights come from the checkpoint
    backbone=dict(init_cfg=None),
    bbox_head=dict(num_classes=1),
    test_cfg=dict(
        nms_pre=1000,
        min_bbox_size=0,
        score_thr=0.05,
        nms=dict(type='nms', iou_threshold=0.6),
        max_per_img=100))

train_dataloader = dict(dataset=dict(metainfo=dict(classes=('person', ))))
val_dataloader = dict(dataset=dict(metainfo=dict(classes=('person', ))))
test_dataloader = val_dataloader
