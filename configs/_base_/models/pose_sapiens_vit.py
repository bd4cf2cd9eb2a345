# Sapiens top-down pose model: ViT encoder + heatmap head (official layout:
# two 4x4 deconvolutions and two 1x1 convolutions, 768 channels, IN + SiLU).
# A leaf config sets the size through configs/_base_/models/sapiens_<size>.py
# and fills in arch / init_cfg / in_channels from it, out_channels from the
# dataset and decoder from the dataset's `codec` (the one GenerateTarget uses).
model = dict(
    type='TopdownPoseEstimator',
    data_preprocessor=dict(
        type='PoseDataPreprocessor',
        mean=[123.675, 116.28, 103.53],
        std=[58.395, 57.12, 57.375],
        bgr_to_rgb=True),
    backbone=dict(
        type='mmpretrain.SapiensVisionTransformer',
        arch='sapiens_0.3b',
        img_size=(1024, 768),
        patch_size=16,
        patch_cfg=dict(padding=2),
        qkv_bias=True,
        final_norm=True,
        drop_path_rate=0.0,
        with_cls_token=False,
        out_type='featmap'),  # init_cfg: set by the leaf config
    head=dict(
        type='SapiensHeatmapHead',
        in_channels=1024,
        out_channels=17,
        deconv_out_channels=(768, 768),  # x4: 1/16 -> 1/4 resolution
        deconv_kernel_sizes=(4, 4),
        conv_out_channels=(768, 768),
        conv_kernel_sizes=(1, 1),
        loss=dict(type='KeypointMSELoss', use_target_weight=True)),
    # head.decoder: the dataset's `codec`, set by the leaf config
    test_cfg=dict(flip_test=True, flip_mode='heatmap', shift_heatmap=False))
