# Surface-normal data in the folder layout read by NormalFolderDataset:
# <data_root>/<split>/images/<stem>.png|jpg, masks/<stem>.png (foreground =
# value > 0) and normals/<stem>.npy ((H, W, 3) camera-frame XYZ in [-1, 1],
# OpenCV axes: X right, Y down, Z forward). The synthetic generator
# (sapiens_mm.datasets.synthetic) writes exactly this layout. Official
# pipeline (no rotation for normals; RandomBackground, used only for the
# internal render_people data, is left out).
dataset_type = 'NormalFolderDataset'
data_root = 'data/normal'
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
    dict(type='DenseRandomFlip', prob=0.5),  # negates X on horizontal flips
    # unit normals on the foreground, zero vector (invalid) elsewhere
    dict(type='GenerateNormalTarget'),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackDenseInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(image_size[1], image_size[0]), keep_ratio=False),
    # loaded after Resize: the metric runs at the original size
    dict(type='LoadDenseAnnotations'),
    dict(type='GenerateNormalTarget'),
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
            normal_path='train/normals'),
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
            normal_path='val/normals'),
        test_mode=True,
        pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='SapiensNormalMetric')
test_evaluator = val_evaluator
