# Sapiens2 normal data in the folder layout read by NormalFolderDataset:
# <data_root>/<split>/images/<stem>.png|jpg, masks/<stem>.png (foreground =
# value > 0) and normals/<stem>.npy ((H, W, 3) camera-frame normals,
# OpenCV axes).
# Official pipelines: PhotoMetric, Scale 0.5-2 (p 0.3), Crop (p 0.3),
# Flip (p 0.3), Resize, with DownUpSample (p 0.2) and Blur, Noise and
# Solarize (p 0.3 each; strengths not in the facts: sigma 0.1-2, noise std
# 2-10, threshold 128); test: the official
# ResizePadImage (aspect kept, centre pad to 1024x768), the prediction is
# cropped and resized back to the original size by the estimator.
dataset_type = 'NormalFolderDataset'
data_root = 'data/normal'
image_size = (1024, 768)  # (H, W)

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadDenseAnnotations'),
    dict(type='PhotoMetricDistortion'),
    dict(type='RandomDownUpSample', prob=0.2, scale_range=(0.1, 0.7)),
    dict(
        type='RandomApply',
        transforms=[
            dict(
                type='RandomResize',
                scale=(image_size[1], image_size[0]),
                ratio_range=(0.5, 2.0),
                keep_ratio=True)
        ],
        prob=0.3),
    dict(
        type='RandomApply',
        transforms=[dict(type='RandomCrop', crop_size=image_size)],
        prob=0.3),
    dict(type='DenseRandomFlip', prob=0.3),
    dict(type='Resize', scale=(image_size[1], image_size[0]), keep_ratio=False),
    dict(type='mmpretrain.GaussianBlur', magnitude_range=(0.1, 2.0),
         prob=0.3),
    dict(type='RandomGaussianNoise', prob=0.3),
    dict(type='mmpretrain.Solarize', thr=128, prob=0.3),
    dict(type='GenerateNormalTarget'),
    dict(type='PackDenseInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizePadImage', size=image_size),
    # loaded after the resize: the metric runs at the original size
    dict(type='LoadDenseAnnotations'),
    dict(type='GenerateNormalTarget'),
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
