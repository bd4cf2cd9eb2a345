# Goliath-style body-part segmentation data (28 classes) in the folder layout
# read by BodyPartSegDataset: <data_root>/<split>/images/*.{jpg,png} and
# <data_root>/<split>/masks/*.png (uint8 class ids, same stem). The synthetic
# generator (sapiens_mm.datasets.synthetic) writes exactly this layout.
# Masks in the original 34-class Goliath ids: add label_map='goliath_34_to_28'
# to the datasets below.
dataset_type = 'BodyPartSegDataset'
data_root = 'data/goliath'
# Background pictures without people for RandomBackground (official p=0.8).
# Start-up fails with a clear message when the folder is missing or empty;
# set the transform's prob to 0.0 to train without it.
background_root = 'data/coco/no_humans'
image_size = (1024, 768)  # (H, W)

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='RandomBackground', prob=0.8, background_root=background_root),
    dict(
        type='RandomResize',
        scale=(image_size[1], image_size[0]),
        ratio_range=(0.2, 2.0),
        keep_ratio=True),
    dict(type='RandomCrop', crop_size=image_size, cat_max_ratio=0.75),
    dict(
        type='Resize',
        scale=(image_size[1], image_size[0]),
        keep_ratio=False),
    dict(type='RandomRotate', prob=0.5, degree=45, seg_pad_val=0),
    dict(type='BodyPartRandomFlip', prob=0.5, vocab='goliath_28'),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='Resize',
        scale=(image_size[1], image_size[0]),
        keep_ratio=False),
    # labels are loaded after Resize: the metric runs at the original size
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
        vocab='goliath_28',
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
        vocab='goliath_28',
        data_prefix=dict(img_path='val/images', seg_map_path='val/masks'),
        test_mode=True,
        pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator
