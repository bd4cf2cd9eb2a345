# Sapiens surface-normal model: ViT encoder (patch padding 2, official) +
# official VitNormalHead layout (3 deconvs x8 -> 1/2 resolution, 768
# channels, 3 outputs). Loss: (1 - cos) + L1 on the foreground, after a
# bilinear upsampling of the prediction to the target size. A leaf config
# sets the size through configs/_base_/models/sapiens_<size>.py.
data_preprocessor = dict(
    type='SegDataPreProcessor',
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    bgr_to_rgb=True,
    size=(1024, 768),  # (H, W)
    pad_val=0,
    seg_pad_val=0)
model = dict(
    type='SapiensDenseEstimator',
    task='normal',
    data_preprocessor=data_preprocessor,
    backbone=dict(
        type='mmpretrain.SapiensVisionTransformer',
        arch='sapiens_0.3b',
        img_size=(1024, 768),
        patch_size=16,
        qkv_bias=True,
        final_norm=True,
        drop_path_rate=0.0,
        with_cls_token=False,
        out_type='featmap',
        patch_cfg=dict(padding=2)),  # init_cfg: set by the leaf config
    decode_head=dict(
        type='SapiensNormalHead',
        in_channels=1024,
        channels=768,
        deconv_out_channels=(768, 768, 768),  # x8: 1/2 resolution
        deconv_kernel_sizes=(4, 4, 4),
        conv_out_channels=(768, 768, 768),
        conv_kernel_sizes=(1, 1, 1),
        out_channels=3,
        dropout_ratio=0.1,
        align_corners=False,
        loss_decode=[
            dict(type='NormalCosineLoss', loss_weight=1.0),
            dict(type='NormalL1Loss', loss_weight=1.0),
        ]),
    train_cfg=dict(),
    # 'slide' (with crop_size / stride) and flip=True are also available;
    # predictions are unit camera-frame normals at the original image size.
    test_cfg=dict(mode='whole'))
