# Sapiens2 albedo model (official AlbedoHead: the normal-head trunk with
# RMSNorm2d instead of InstanceNorm and `conv_albedo` -> RGB, clamped to
# [0, 1] at inference). Losses: L1 (x2), gradient L1 (x2), chromaticity L1
# (x1). No checkpoint is released.
_base_ = ['./dense_sapiens2.py']
model = dict(
    task='albedo',
    decode_head=dict(
        type='Sapiens2AlbedoHead',
        in_channels=1024,
        upsample_channels=(768, 512, 256, 128),
        conv_out_channels=(64, 32, 16),
        align_corners=False,
        loss_decode=[
            dict(type='AlbedoLoss', term='l1', loss_weight=2.0),
            dict(type='AlbedoLoss', term='grad', loss_weight=2.0),
            dict(type='AlbedoLoss', term='chromaticity', loss_weight=1.0),
        ]))
