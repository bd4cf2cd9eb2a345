# Tiny Sapiens2-shaped encoder and heads for tests and quick CPU runs.
# Randomly initialised: no pretrained checkpoint exists for it. Same names as
# the released sizes (configs/_base_/models/sapiens2_0.4b.py), small values.
sapiens2_arch = 'sapiens2_tiny'
sapiens2_embed_dims = 64
sapiens2_num_layers = 2
sapiens2_pretrained = None
sapiens2_pose_deconv_channels = (32, 32)
sapiens2_pose_conv_channels = (32, 32, 16)
sapiens2_normal_upsample_channels = (32, 16, 16, 8)
sapiens2_normal_conv_channels = (8, 8, 8)
sapiens2_pointmap_upsample_channels = (32, 16, 16, 8)
sapiens2_pointmap_conv_channels = (8, 8, 8)
sapiens2_pointmap_scale_conv_channels = (32, 16, 8)
sapiens2_albedo_upsample_channels = (32, 16, 16, 8)
sapiens2_albedo_conv_channels = (8, 8, 8)
sapiens2_matting_upsample_channels = (32, 16, 16, 8)
sapiens2_matting_conv_channels = (8, 8, 8)
sapiens2_layer_decay_rate = 0.8
sapiens2_clip_grad = 2.0
sapiens2_pose_lr = 5e-4
sapiens2_seg_lr = 5e-4
sapiens2_normal_lr = 5e-4
sapiens2_pointmap_lr = 5e-4
sapiens2_albedo_lr = 5e-4
sapiens2_matting_lr = 5e-4
sapiens2_pose_iters = 2000
sapiens2_seg_iters = 2000
sapiens2_normal_iters = 2000
sapiens2_pointmap_iters = 2000
sapiens2_albedo_iters = 2000
sapiens2_matting_iters = 2000
sapiens2_pose_batch_size = 2
sapiens2_seg_batch_size = 2
sapiens2_normal_batch_size = 2
sapiens2_pointmap_batch_size = 2
sapiens2_albedo_batch_size = 2
sapiens2_matting_batch_size = 2
