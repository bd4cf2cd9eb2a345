# MAE pretraining schedule (official Sapiens settings).
# Learning rate: `lr` below is the rate per 256 images. auto_scale_lr (on)
# multiplies it by (number of GPUs x train_dataloader.batch_size) / 256 at
# start-up: the official 8 GPUs x 512 get 1.5e-4 x 4096 / 256 = 2.4e-3, a
# single GPU with batch 16 gets 9.4e-6. The scaled value is in the log.
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(
        type='AdamW', lr=1.5e-4, betas=(0.9, 0.95), weight_decay=0.05),
    # The official config also sets error_if_nonfinite=True; left out so that
    # --amp (fp16 with dynamic loss scaling) can skip overflowing steps.
    clip_grad=dict(max_norm=1.0),
    paramwise_cfg=dict(
        custom_keys={
            'ln': dict(decay_mult=0.0),
            'bias': dict(decay_mult=0.0),
            'pos_embed': dict(decay_mult=0.),
            'mask_token': dict(decay_mult=0.),
            'cls_token': dict(decay_mult=0.)
        }))

# 40 epochs of linear warm-up, then cosine decay to 0 at epoch 1600; both
# stepped every iteration.
param_scheduler = [
    dict(
        type='LinearLR',
        start_factor=1e-4,
        by_epoch=True,
        begin=0,
        end=40,
        convert_to_iter_based=True),
    dict(
        type='CosineAnnealingLR',
        T_max=1560,
        by_epoch=True,
        begin=40,
        end=1600,
        convert_to_iter_based=True)
]

train_cfg = dict(type='EpochBasedTrainLoop', max_epochs=1600)

auto_scale_lr = dict(base_batch_size=256, enable=True)
