# Sapiens2 surface-normal model (official NormalHead: 3x3 input conv, four
# PixelShuffle x2 blocks to full resolution, three 3x3 convs, `conv_normal`).
# Losses on the foreground: cosine (x10), L1 (x1), finite-difference (x10).
# The leaf config sets the channel plans from the size _base_.
_base_ = ['./dense_sapiens2.py']
model = dict(
    task='normal',
    decode_head=dict(
        type='Sapiens2NormalHead',
        in_channels=1024,
        upsample_channels=(768, 512, 256, 128),
        conv_out_channels=(64, 32, 16),
        align_corners=False,
        loss_decode=[
            dict(type='NormalCosineLoss', loss_weight=10.0),
            dict(type='NormalL1Loss', loss_weight=1.0),
            dict(type='NormalGradLoss', loss_weight=10.0),
        ]))
