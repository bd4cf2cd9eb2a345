# Official Sapiens2 fine-tuning schedule (iteration based): AdamW, betas
# (0.9, 0.999), weight decay 0.1 (0 for 1-D tensors and biases; the CLS and
# register tokens are decayed), layer-wise lr decay, L2 gradient clipping.
# The leaf config sets lr, decay rate, clip norm and iterations from the size
# _base_, and the scheduler: LinearLR (factor 1e-3) for 500 iterations, then
# PolyLR (power 1) to 0 over the rest. The official optimizer is the fused
# AdamW on GPU; add optimizer=dict(fused=True) there.
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(
        type='AdamW', lr=5e-4, betas=(0.9, 0.999), weight_decay=0.1),
    constructor='SapiensLayerDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.8),
    clip_grad=dict(max_norm=2.0, norm_type=2))
warmup_iters = 500
train_cfg = dict(type='IterBasedTrainLoop', max_iters=20000, val_interval=1000)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
# official: seed 0, a different seed on each rank
randomness = dict(seed=0, diff_rank_seed=True)
