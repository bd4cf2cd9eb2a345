# Sapiens2 top-down pose model (official PoseHeatmapHead layout: two 4x4
# deconvolutions and three 1x1 convolutions, IN + SiLU, `conv_pose` to 308
# heatmaps at 1/4 of 1024x768; KeypointMSELoss x10). The leaf config fills in
# arch / init_cfg / channel plans from the size _base_ and the decoder from
# the dataset's `codec`. Flip test: heatmaps of the flipped crop flipped
# back, channels swapped, averaged without shift (official).
_base_ = ['./sapiens2_backbone.py']
model = dict(
    type='Sapiens2TopdownPoseEstimator',  # loads official decode_head.* keys
    data_preprocessor=dict(
        type='PoseDataPreprocessor',
        mean={{_base_.sapiens2_mean}},
        std={{_base_.sapiens2_std}},
        bgr_to_rgb=True),
    backbone={{_base_.sapiens2_backbone}},
    head=dict(
        type='Sapiens2HeatmapHead',
        in_channels=1024,
        out_channels=308,
        deconv_out_channels=(1024, 768),  # x4: 1/16 -> 1/4 resolution
        deconv_kernel_sizes=(4, 4),
        conv_out_channels=(512, 512, 256),
        conv_kernel_sizes=(1, 1, 1),
        loss=dict(
            type='KeypointMSELoss', use_target_weight=True,
            loss_weight=10.0)),
    test_cfg=dict(flip_test=True, flip_mode='heatmap', shift_heatmap=False))
