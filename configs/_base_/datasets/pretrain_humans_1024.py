# Unlabeled human images for MAE pretraining, 1024x1024 random crops.
# data_root is scanned recursively for .jpg/.jpeg/.png/.webp; to train on a
# curated subset, point ann_file at the manifest written by
# tools/curate_images.py (paths in it are relative to data_root), e.g.
#   --cfg-options train_dataloader.dataset.ann_file=curation/manifest.txt
# Unreadable / truncated files are skipped and counted in the log.
dataset_type = 'UnlabeledImageDataset'
data_root = 'data/humans'

train_pipeline = [
    # The dataset decodes the images itself (no LoadImageFromFile here).
    dict(
        type='RandomResizedCrop',
        scale=1024,
        crop_ratio_range=(0.2, 1.0),
        backend='pillow',
        interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackInputs'),
]

train_dataloader = dict(
    batch_size=512,  # per GPU; official runs: 8 GPUs x 512
    num_workers=8,
    persistent_workers=True,
    pin_memory=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    dataset=dict(
        type=dataset_type,
        data_root=data_root,
        ann_file='',
        pipeline=train_pipeline))
