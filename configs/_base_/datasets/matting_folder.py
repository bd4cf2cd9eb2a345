# Human-matting data in the folder layout read by MattingFolderDataset:
# <data_root>/<split>/images/<stem>.jpg|png and alphas/<stem>.png (8- or
# 16-bit grey), optionally fgs/ and bgs/ (RGB) for the composition and
# foreground losses. P3M-10k: data_prefix=dict(img_path='train/blurred_image',
# alpha_path='train/mask'); AM-2k: img_path='train/original',
# alpha_path='train/mask'.
# Pre-processing as Sapiens2 segmentation: the whole frame stretched to
# 1024x768 (AREA when shrinking, else CUBIC); the prediction is resized back
# bilinearly and clamped. Training keeps image and matte aligned: crops and
# flips move the matting fields with the image, MattingResize resizes them
# bilinearly.
dataset_type = 'MattingFolderDataset'
data_root = 'data/matting'
image_size = (1024, 768)  # (H, W)

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadMattingAnnotations'),
    dict(
        type='RandomResize',
        scale=(image_size[1], image_size[0]),
        ratio_range=(0.5, 2.0),
        keep_ratio=True,
        resize_type='MattingResize'),
    dict(type='RandomCrop', crop_size=image_size),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='MattingResize', scale=(image_size[1], image_size[0]),
         keep_ratio=False),
    dict(type='GenerateMattingTarget'),
    dict(type='PackDenseInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='AreaCubicResize',
        scale=(image_size[1], image_size[0]),
        keep_ratio=False),
    # loaded after the resize: the metric runs at the original size
    dict(type='LoadMattingAnnotations'),
    dict(type='PackDenseInputs'),
]

train_dataloader = dict(
    batch_size=8,
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        data_prefix=dict(img_path='train/images', alpha_path='train/alphas'),
        pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        data_prefix=dict(img_path='val/images', alpha_path='val/alphas'),
        test_mode=True,
        pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='MattingMetric')
test_evaluator = val_evaluator
