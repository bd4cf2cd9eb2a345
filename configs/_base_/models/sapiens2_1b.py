# Sapiens2 1b: everything a size variant of a Sapiens2 task config changes
# (the encoder, the head channel plans and the official fine-tuning recipe).
# Task configs read these values as {{_base_.sapiens2_*}}; their size
# variants differ by the _base_ line pointing at this file only.
sapiens2_arch = 'sapiens2_1b'
sapiens2_embed_dims = 1536  # head in_channels
sapiens2_num_layers = 40  # layer-wise lr decay depth
# Official pretrained encoder (flat safetensors, facebook/sapiens2-pretrain-
# 1b); put it here or override with
# --cfg-options model.backbone.init_cfg.checkpoint=/path/to/file.
sapiens2_pretrained = dict(
    type='Pretrained',
    checkpoint='checkpoints/sapiens2/sapiens2_1b_pretrain.safetensors')
# Head channel plans of the released task checkpoints.
sapiens2_pose_deconv_channels = (1536, 1024)
sapiens2_pose_conv_channels = (768, 512, 256)
sapiens2_normal_upsample_channels = (768, 512, 256, 128)
sapiens2_normal_conv_channels = (64, 32, 16)
sapiens2_pointmap_upsample_channels = (1536, 768, 512, 256)
sapiens2_pointmap_conv_channels = (64, 32, 16)
sapiens2_pointmap_scale_conv_channels = (1536, 512, 128)
sapiens2_albedo_upsample_channels = (768, 512, 256, 128)
sapiens2_albedo_conv_channels = (64, 32, 16)
# Matting (facebook/sapiens2-matting-1b): the widths are not documented and
# no key list of the released file was available here; these are the normal
# head's (the Transformers port builds both from the same Sapiens2Head).
# init_model reads the real widths from a checkpoint's tensor shapes, so a
# file with other widths still loads strictly.
sapiens2_matting_upsample_channels = (768, 512, 256, 128)
sapiens2_matting_conv_channels = (64, 32, 16)
# Official recipe: layer decay, gradient clipping (L2 norm), lr, iterations
# and batch size per GPU (8 GPUs per node) of each task.
sapiens2_layer_decay_rate = 0.9
sapiens2_clip_grad = 4.0
sapiens2_pose_lr = 5e-4
sapiens2_seg_lr = 5e-4
sapiens2_normal_lr = 5e-4
sapiens2_pointmap_lr = 5e-4
sapiens2_albedo_lr = 5e-4
sapiens2_matting_lr = 5e-4
sapiens2_pose_iters = 20000
sapiens2_seg_iters = 20000
sapiens2_normal_iters = 40000
sapiens2_pointmap_iters = 40000
sapiens2_albedo_iters = 40000
sapiens2_matting_iters = 40000
sapiens2_pose_batch_size = 7
sapiens2_seg_batch_size = 8
sapiens2_normal_batch_size = 7
sapiens2_pointmap_batch_size = 3
sapiens2_albedo_batch_size = 7
sapiens2_matting_batch_size = 7
