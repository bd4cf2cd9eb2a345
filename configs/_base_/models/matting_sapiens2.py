# Sapiens2 human-matting model (Transformers' Sapiens2ForImageMatting; the
# official file sapiens2_1b_matting.safetensors): the generic Sapiens2 dense
# trunk (as the normal head) with `conv_matting` -> 4 channels and a sigmoid:
# pre-multiplied foreground RGB and alpha in [0, 1]. The official training
# losses are not public; ours: alpha L1, Laplacian pyramid, composition and
# foreground L1 (why: docs/matting.md and the MattingLoss docstring).
_base_ = ['./dense_sapiens2.py']
model = dict(
    task='matting',
    decode_head=dict(
        type='Sapiens2MattingHead',
        in_channels=1024,
        upsample_channels=(768, 512, 256, 128),
        conv_out_channels=(64, 32, 16),
        align_corners=False,
        loss_decode=[
            dict(type='MattingLoss', term='alpha_l1', loss_weight=1.0),
            dict(type='MattingLoss', term='laplacian', loss_weight=1.0),
            dict(type='MattingLoss', term='composition', loss_weight=1.0),
            dict(type='MattingLoss', term='foreground', loss_weight=1.0),
        ]))
