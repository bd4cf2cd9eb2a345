# Sapiens body-part segmentation model: ViT encoder + deconv/conv decode head
# (official VitHead layout). A leaf config sets the size through
# configs/_base_/models/sapiens_<size>.py and fills in
# arch / init_cfg / in_channels from it.
data_preprocessor = dict(
    type='SegDataPreProcessor',
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    bgr_to_rgb=True,
    size=(1024, 768),  # (H, W)
    pad_val=0,
    seg_pad_val=255)
model = dict(
    type='EncoderDecoder',
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
        out_type='featmap'),  # init_cfg: set by the leaf config
    decode_head=dict(
        type='SapiensSegHead',
        in_channels=1024,
        channels=768,
        deconv_out_channels=(768, 768, 768),  # x8: 1/16 -> 1/2 resolution
        deconv_kernel_sizes=(4, 4, 4),
        conv_out_channels=(768, 768, 768),
        conv_kernel_sizes=(1, 1, 1),
        num_classes=28,
        dropout_ratio=0.1,
        align_corners=False,
        # Official: per-pixel class-weighted CE (reduction='none'), averaged
        # over all label pixels; the weights come from the package vocabulary.
        loss_decode=dict(
            type='CrossEntropyLoss',
            use_sigmoid=False,
            loss_weight=1.0,
            reduction='none',
            class_weight='goliath_28')),
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))
