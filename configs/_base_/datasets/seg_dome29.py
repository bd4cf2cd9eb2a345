# Sapiens2 body-part segmentation data: the Goliath folder layout read by
# BodyPartSegDataset (<data_root>/<split>/images, <split>/masks; see
# seg_goliath.py) in the 29-class dome_29 vocabulary. Masks in the original
# 34 Goliath ids: label_map='goliath_34_to_29'; masks in v1's 28 ids:
# label_map='goliath_28_to_29'. The official pipeline (the blur and noise
# strengths are not in the facts: sigma 0.1-2, noise std 2-10).
dataset_type = 'BodyPartSegDataset'
data_root = 'data/goliath'
# Background pictures without people for RandomBackground (official p=0.8).
background_root = 'data/coco/no_humans'
image_size = (1024, 768)  # (H, W)

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='RandomBackground', prob=0.8, background_root=background_root),
    dict(
        type='RandomResize',
        scale=(image_size[1], image_size[0]),
        ratio_range=(0.4, 2.0),
        keep_ratio=True),
    dict(
        type='RandomApply',
        transforms=[
            dict(type='RandomCrop', crop_size=image_size, cat_max_ratio=0.75)
        ],
        prob=0.3),
    dict(type='mmpretrain.GaussianBlur', magnitude_range=(0.1, 2.0),
         prob=0.3),
    dict(type='RandomGaussianNoise', prob=0.3),
    dict(type='RandomRotate', prob=0.5, degree=60, seg_pad_val=0),
    dict(type='BodyPartRandomFlip', prob=0.5, vocab='dome_29'),
    dict(type='PhotoMetricDistortion'),
    dict(
        type='Resize',
        scale=(image_size[1], image_size[0]),
        keep_ratio=False),
    dict(type='PackSegInputs'),
]
# Official: resize ignoring the aspect ratio, INTER_AREA when the width
# shrinks, else INTER_CUBIC; logits are resized back bilinearly.
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='AreaCubicResize',
        scale=(image_size[1], image_size[0]),
        keep_ratio=False),
    # labels are loaded after the resize: the metric runs at the original size
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs'),
]

train_dataloader = dict(
    batch_size=12,
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        vocab='dome_29',
        data_prefix=dict(img_path='train/images', seg_map_path='train/masks'),
        pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        vocab='dome_29',
        data_prefix=dict(img_path='val/images', seg_map_path='val/masks'),
        test_mode=True,
        pipeline=test_pipeline))
test_dataloader = val_dataloader
# official SegEvaluator: a class absent from prediction and label counts as 0
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'], nan_to_num=0)
test_evaluator = val_evaluator
