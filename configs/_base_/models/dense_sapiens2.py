# Shared part of the Sapiens2 normal / pointmap / albedo models: the encoder
# and the preprocessor. ResizePadImage (test) and Resize (train) give
# 1024x768 inputs, so the preprocessor pads nothing.
_base_ = ['./sapiens2_backbone.py']
data_preprocessor = dict(
    type='SegDataPreProcessor',
    mean={{_base_.sapiens2_mean}},
    std={{_base_.sapiens2_std}},
    bgr_to_rgb=True,
    size=(1024, 768),  # (H, W)
    pad_val=0,
    seg_pad_val=0)
model = dict(
    type='Sapiens2DenseEstimator',
    data_preprocessor=data_preprocessor,
    backbone={{_base_.sapiens2_backbone}},
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))
