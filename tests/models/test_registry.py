"""Stock mmpose / mmseg configs use the backbone through their registries."""
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope


def test_stock_mmpose_config_builds_and_runs(tmp_path):
    cfg_file = tmp_path / 'pose_cfg.py'
    cfg_file.write_text('''
custom_imports = dict(imports=['sapiens_mm'], allow_failed_imports=False)
model = dict(
    type='TopdownPoseEstimator',
    data_preprocessor=dict(type='PoseDataPreprocessor',
                           mean=[123.675, 116.28, 103.53],
                           std=[58.395, 57.12, 57.375], bgr_to_rgb=True),
    backbone=dict(type='mmpretrain.SapiensVisionTransformer',
                  arch='sapiens_tiny', img_size=(256, 192),
                  patch_cfg=dict(padding=2)),
    head=dict(type='HeatmapHead', in_channels=64, out_channels=17,
              deconv_out_channels=(32, 32), deconv_kernel_sizes=(4, 4),
              loss=dict(type='KeypointMSELoss', use_target_weight=True),
              decoder=dict(type='UDPHeatmap', input_size=(192, 256),
                           heatmap_size=(48, 64), sigma=2)))
''')
    cfg = Config.fromfile(str(cfg_file))
    from mmpose.registry import MODELS
    with DefaultScope.overwrite_default_scope('mmpose'):
        model = MODELS.build(cfg.model).eval()
    assert type(model.backbone).__name__ == 'SapiensVisionTransformer'
    with torch.no_grad():
        heatmaps = model(torch.randn(1, 3, 256, 192), None, mode='tensor')
    assert heatmaps.shape == (1, 17, 64, 48)


def test_stock_mmseg_config_builds_and_runs(tmp_path):
    cfg_file = tmp_path / 'seg_cfg.py'
    cfg_file.write_text('''
custom_imports = dict(imports=['sapiens_mm'], allow_failed_imports=False)
model = dict(
    type='EncoderDecoder',
    data_preprocessor=dict(type='SegDataPreProcessor',
                           mean=[123.675, 116.28, 103.53],
                           std=[58.395, 57.12, 57.375], bgr_to_rgb=True,
                           size=(128, 96), seg_pad_val=255),
    backbone=dict(type='mmpretrain.SapiensVisionTransformer',
                  arch='sapiens_tiny', img_size=(128, 96)),
    decode_head=dict(type='FCNHead', in_channels=64, channels=32,
                     num_convs=1, num_classes=28, in_index=0,
                     norm_cfg=dict(type='BN', requires_grad=True),
                     loss_decode=dict(type='CrossEntropyLoss')),
    test_cfg=dict(mode='whole'))
''')
    cfg = Config.fromfile(str(cfg_file))
    from mmseg.registry import MODELS
    with DefaultScope.overwrite_default_scope('mmseg'):
        model = MODELS.build(cfg.model).eval()
    with torch.no_grad():
        logits = model(torch.randn(1, 3, 128, 96), mode='tensor')
    assert logits.shape == (1, 28, 8, 6)
