# Sapiens relative-depth model: ViT encoder + official VitDepthHead layout
# (4 deconvs x16 -> full 1024x768 resolution, 384 channels, 1 output). A leaf
# config sets the size through configs/_base_/models/sapiens_<size>.py and
# fills in arch / init_cfg / in_channels from it. The depth backbone has no
# patch padding (official).
data_preprocessor = dict(
    type='SegDataPreProcessor',
    mean=[123.675, 116.28, 103.53],
    std=[58.395, 57.12, 57.375],
    bgr_to_rgb=True,
    size=(1024, 768),  # (H, W)
    pad_val=0,
    seg_pad_val=-1)  # padded target pixels are background (invalid)
model = dict(
    type='SapiensDenseEstimator',
    task='depth',
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
        type='SapiensDepthHead',
        in_channels=1024,
        channels=384,
        deconv_out_channels=(384, 384, 384, 384),  # x16: full resolution
        deconv_kernel_sizes=(4, 4, 4, 4),
        conv_out_channels=(384, 384),
        conv_kernel_sizes=(1, 1),
        out_channels=1,
        dropout_ratio=0.1,
        align_corners=False,
        loss_decode=dict(type='DepthSiLogLoss', loss_weight=1.0)),
    train_cfg=dict(),
    # 'slide' (with crop_size / stride) and flip=True are also available.
    test_cfg=dict(mode='whole'))
