# Sapiens2 pointmap model (official PointmapHead: the normal-head trunk with
# `conv_pointmap` -> canonical XYZ, plus the scale branch on the raw feature
# map -> s = 768 / fx). Prediction: metric pointmap = canonical / s, and its
# Z as depth. The leaf config sets the channel plans from the size _base_.
_base_ = ['./dense_sapiens2.py']
model = dict(
    task='pointmap',
    decode_head=dict(
        type='Sapiens2PointmapHead',
        in_channels=1024,
        upsample_channels=(1536, 768, 512, 256),
        conv_out_channels=(64, 32, 16),
        scale_conv_channels=(1536, 512, 128),
        featmap_size=(64, 48),  # 1024x768 / 16
        canonical_focal=768.0,
        align_corners=False,
        # every official term and weight (see PointmapLoss)
        loss_decode=dict(type='PointmapLoss')))
