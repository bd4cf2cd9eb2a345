# Sapiens2 body-part segmentation model (official SegHead layout: four 4x4
# deconvolutions 512-256-128-64, x16 to full resolution, two 1x1 convs of 64,
# IN + SiLU, `conv_seg` to the 29 dome_29 classes, no dropout). Loss:
# class-weighted CE averaged over all label pixels + Dice over the classes
# present in each image (background excluded). The leaf config sets arch /
# init_cfg / in_channels from the size _base_.
_base_ = ['./sapiens2_backbone.py']
data_preprocessor = dict(
    type='SegDataPreProcessor',
    mean={{_base_.sapiens2_mean}},
    std={{_base_.sapiens2_std}},
    bgr_to_rgb=True,
    size=(1024, 768),  # (H, W)
    pad_val=0,
    seg_pad_val=255)
model = dict(
    type='EncoderDecoder',
    data_preprocessor=data_preprocessor,
    backbone={{_base_.sapiens2_backbone}},
    decode_head=dict(
        type='SapiensSegHead',
        in_channels=1024,
        channels=64,
        num_classes=29,
        deconv_out_channels=(512, 256, 128, 64),
        deconv_kernel_sizes=(4, 4, 4, 4),
        conv_out_channels=(64, 64),
        conv_kernel_sizes=(1, 1),
        dropout_ratio=0.0,
        align_corners=False,
        loss_decode=[
            dict(
                type='CrossEntropyLoss',
                use_sigmoid=False,
                loss_weight=1.0,
                reduction='none',
                class_weight='dome_29'),
            dict(type='BodyPartDiceLoss', loss_weight=1.0),
        ]),
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))
