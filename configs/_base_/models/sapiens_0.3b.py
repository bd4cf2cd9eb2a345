# Sapiens 0.3b encoder: the one line a size variant changes is its _base_ entry
# pointing at this file. Task configs read these values as {{_base_.sapiens_*}}.
sapiens_arch = 'sapiens_0.3b'
sapiens_embed_dims = 1024  # head in_channels
sapiens_num_layers = 24  # layer-wise lr decay depth
# Official MAE-pretrained backbone (flat "clean" state dict); download it from
# the Sapiens release and put it here, or override with
# --cfg-options model.backbone.init_cfg.checkpoint=/path/to/file.
sapiens_pretrained = dict(
    type='Pretrained', checkpoint='checkpoints/sapiens_0.3b/sapiens_0.3b_epoch_1600_clean.pth')
