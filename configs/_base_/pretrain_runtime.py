# Runtime settings of the MAE pretraining configs (configs/pretrain/).
default_scope = 'mmpretrain'
custom_imports = dict(imports=['sapiens_mm'], allow_failed_imports=False)

default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=100),
    param_scheduler=dict(type='ParamSchedulerHook'),
    # A checkpoint every 5 epochs (official), the last 3 kept.
    checkpoint=dict(
        type='CheckpointHook', interval=5, max_keep_ckpts=3,
        # crash-safe writes: sapiens_mm.engine.fileio.AtomicLocalBackend
        backend_args=dict(backend='sapiens_atomic_local')),
    sampler_seed=dict(type='DistSamplerSeedHook'),
)
# original | masked | reconstruction grids in <work_dir>/vis_mae/
custom_hooks = [
    dict(type='mmpretrain.MAEReconstructionHook', interval=1000, num_images=4)
]

env_cfg = dict(
    cudnn_benchmark=True,
    mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
    dist_cfg=dict(backend='nccl'))

vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(type='UniversalVisualizer', vis_backends=vis_backends)
log_processor = dict(window_size=10)
log_level = 'INFO'

load_from = None
resume = False
randomness = dict(seed=0, diff_rank_seed=True)
