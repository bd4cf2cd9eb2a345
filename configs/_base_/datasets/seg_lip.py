# LIP single-person human parsing, 20 classes (LIPBodyPartDataset finds the
# published layouts under data_root: images/{train,val}_images +
# segmentations/{train,val}_segmentations, or the TrainVal_* zip layout).
dataset_type = 'LIPBodyPartDataset'
data_root = 'data/LIP'
image_size = (1024, 768)  # (H, W)

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(
        type='RandomResize',
        scale=(image_size[1], image_size[0]),
        ratio_range=(0.75, 1.25),
        keep_ratio=True),
    dict(type='RandomCrop', crop_size=image_size, cat_max_ratio=0.75),
    dict(
        type='Resize',
        scale=(image_size[1], image_size[0]),
        keep_ratio=False),
    dict(type='RandomRotate', prob=0.5, degree=45, seg_pad_val=255),
    dict(type='BodyPartRandomFlip', prob=0.5, vocab='lip_cihp_20'),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='Resize',
        scale=(image_size[1], image_size[0]),
        keep_ratio=False),
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs'),
]

train_dataloader = dict(
    batch_size=2,  # per GPU, as in the official launch scripts
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        split='train',
        pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        split='val',
        test_mode=True,
        pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator
