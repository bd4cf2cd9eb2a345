# Relative-depth data in the folder layout read by DepthFolderDataset:
# <data_root>/<split>/images/<stem>.png|jpg, masks/<stem>.png (foreground =
# value > 0, e.g. class-id masks) and depths/<stem>.npy ((H, W) float, any
# unit). The synthetic generator (sapiens_mm.datasets.synthetic) writes
# exactly this layout. Official pipeline (RandomBackground, used only for the
# internal render_people data, is left out).
dataset_type = 'DepthFolderDataset'
data_root = 'data/depth'
image_size = (1024, 768)  # (H, W)

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadDenseAnnotations'),
    dict(
        type='RandomResize',
        scale=(image_size[1], image_size[0]),
        ratio_range=(0.2, 2.0),
        keep_ratio=True),
    dict(type='RandomCrop', crop_size=image_size),
    dict(type='Resize', scale=(image_size[1], image_size[0]), keep_ratio=False),
    dict(type='DenseRandomRotate', prob=0.5, degree=60),
    dict(type='DenseRandomFlip', prob=0.5),
    # foreground min-max normalised to [0, 1], background -1
    dict(type='GenerateDepthTarget'),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackDenseInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(image_size[1], image_size[0]), keep_ratio=False),
    # loaded after Resize: the metric runs at the original size, on the raw
    # foreground depth (the prediction is aligned to it by scale and shift)
    dict(type='LoadDenseAnnotations'),
    dict(type='GenerateDepthTarget', normalize=False),
    dict(type='PackDenseInputs'),
]

train_dataloader = dict(
    batch_size=2,  # per GPU, as in the official launch scripts
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        data_prefix=dict(
            img_path='train/images',
            mask_path='train/masks',
            depth_path='train/depths'),
        pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        data_prefix=dict(
            img_path='val/images',
            mask_path='val/masks',
            depth_path='val/depths'),
        test_mode=True,
        pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='SapiensDepthMetric', align='scale_shift')
test_evaluator = val_evaluator
