# Sapiens 1b encoder: the one line a size variant changes is its _base_ entry
# pointing at this file. Task configs read these values as {{_base_.sapiens_*}}.
sapiens_arch = 'sapiens_1b'
sapiens_embed_dims = 1536  # head in_channels
sapiens_num_layers = 40  # layer-wise lr decay depth
# Official MAE-pretrained backbone (flat "clean" state dict); download it from
# the Sapiens release and put it here, or override with
# --cfg-options model.backbone.init_cfg.checkpoint=/path/to/file.
sapiens_pretrained = dict(
    type='Pretrained', checkpoint='checkpoints/sapiens_1b/sapiens_1b_epoch_173_clean.pth')
