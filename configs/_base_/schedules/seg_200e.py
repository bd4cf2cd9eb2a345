# Official Sapiens segmentation schedule: AdamW 5e-4 with layer-wise lr decay
# 0.85, 400-iteration linear warm-up, then linear (poly 1.0) decay to 0 over
# the epochs. num_layers is read from model.backbone.
max_epochs = 200
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(
        type='AdamW', lr=5e-4, betas=(0.9, 0.999), weight_decay=0.1),
    constructor='SapiensLayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.85),
    clip_grad=dict(max_norm=1.0, norm_type=2))
param_scheduler = [
    dict(
        type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0,
        end=400),
    dict(
        type='PolyLR',
        power=1.0,
        eta_min=0.0,
        begin=0,
        end=max_epochs,
        by_epoch=True),
]
train_cfg = dict(
    type='EpochBasedTrainLoop', max_epochs=max_epochs, val_interval=10)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
