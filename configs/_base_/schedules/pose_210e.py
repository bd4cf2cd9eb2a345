# Official Sapiens pose schedule: 210 epochs, AdamW with layer-wise lr decay
# (num_layers is read from model.backbone), 500-iteration linear warm-up,
# lr x0.1 at epochs 170 and 200. Each leaf config sets the official lr and
# decay rate of its dataset and size.
max_epochs = 210
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(
        type='AdamW', lr=5e-4, betas=(0.9, 0.999), weight_decay=0.1),
    constructor='SapiensLayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.85),
    clip_grad=dict(max_norm=1.0, norm_type=2))
param_scheduler = [
    dict(
        type='LinearLR', begin=0, end=500, start_factor=0.001,
        by_epoch=False),
    dict(
        type='MultiStepLR',
        begin=0,
        end=max_epochs,
        milestones=[170, 200],
        gamma=0.1,
        by_epoch=True),
]
train_cfg = dict(
    type='EpochBasedTrainLoop', max_epochs=max_epochs, val_interval=10)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
# --auto-scale-lr scales the lr by (GPUs x batch size) / 512.
auto_scale_lr = dict(base_batch_size=512)
