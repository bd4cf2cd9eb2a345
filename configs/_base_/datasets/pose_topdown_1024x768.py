# Top-down pose pipelines at the Sapiens input size, 1024x768 (H x W). The
# `codec` is shared by GenerateTarget here and by the model head's decoder
# (set in the leaf config): UDP Gaussian heatmaps at 1/4 resolution.
codec = dict(
    type='UDPHeatmap',
    input_size=(768, 1024),  # (W, H)
    heatmap_size=(192, 256),
    sigma=6)
# Official train pipeline without its Albumentation step (Blur, MedianBlur,
# CoarseDropout), which needs the optional `albumentations` package; add
# dict(type='Albumentation', transforms=[...]) before GenerateTarget if it is
# installed.
train_pipeline = [
    dict(type='LoadImage'),
    dict(type='GetBBoxCenterScale'),
    dict(type='RandomFlip', direction='horizontal'),
    dict(type='RandomHalfBody'),
    dict(type='RandomBBoxTransform'),
    dict(type='TopdownAffine', input_size=codec['input_size'], use_udp=True),
    dict(type='PhotometricDistortion'),
    dict(type='GenerateTarget', encoder=codec),
    dict(type='PackPoseInputs'),
]
val_pipeline = [
    dict(type='LoadImage'),
    dict(type='GetBBoxCenterScale'),
    dict(type='TopdownAffine', input_size=codec['input_size'], use_udp=True),
    dict(type='PackPoseInputs'),
]
