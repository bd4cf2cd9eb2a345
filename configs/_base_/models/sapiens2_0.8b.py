# Sapiens2 0.8b: everything a size variant of a Sapiens2 task config changes
# (the encoder, the head channel plans and the official fine-tuning recipe).
# Task configs read these values as {{_base_.sapiens2_*}}; their size
# variants differ by the _base_ line pointing at this file only.
sapiens2_arch = 'sapiens2_0.8b'
sapiens2_embed_dims = 1280  # head in_channels
sapiens2_num_layers = 32  # layer-wise lr decay depth
# Official pretrained encoder (flat safetensors, facebook/sapiens2-pretrain-
# 0.8b); put it here or override with
# --cfg-options model.backbone.init_cfg.checkpoint=/path/to/file.
sapiens2_pretrained = dict(
    type='Pretrained',
    checkpoint='checkpoints/sapiens2/sapiens2_0.8b_pretrain.safetensors')
# Head channel plans of the released task checkpoints.
sapiens2_pose_deconv_channels = (1024, 768)
sapiens2_pose_conv_channels = (512, 512, 256)
sapiens2_normal_upsample_channels = (768, 512, 256, 128)
sapiens2_normal_conv_channels = (64, 32, 16)
sapiens2_pointmap_upsample_channels = (1536, 768, 512, 256)
sapiens2_pointmap_conv_channels = (64, 32, 16)
sapiens2_pointmap_scale_conv_channels = (1536, 512, 128)
sapiens2_albedo_upsample_channels = (768, 512, 256, 128)
sapiens2_albedo_conv_channels = (64, 32, 16)
# Official recipe: layer decay, gradient clipping (L2 norm), lr, iterations
# and batch size per GPU (8 GPUs per node) of each task.
sapiens2_layer_decay_rate = 0.85
sapiens2_clip_grad = 4.0
sapiens2_pose_lr = 5e-4
sapiens2_seg_lr = 5e-4
sapiens2_normal_lr = 5e-4
sapiens2_pointmap_lr = 5e-4
sapiens2_albedo_lr = 5e-4
sapiens2_pose_iters = 10000
sapiens2_seg_iters = 30000
sapiens2_normal_iters = 10000
sapiens2_pointmap_iters = 20000
sapiens2_albedo_iters = 20000
sapiens2_pose_batch_size = 12
sapiens2_seg_batch_size = 5
sapiens2_normal_batch_size = 12
sapiens2_pointmap_batch_size = 6
sapiens2_albedo_batch_size = 12
