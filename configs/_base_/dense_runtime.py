# Runtime shared by the relative-depth and surface-normal configs (mmseg
# scope). The task config sets default_hooks.checkpoint.save_best.
custom_imports = dict(imports=['sapiens_mm'], allow_failed_imports=False)
default_scope = 'mmseg'
env_cfg = dict(
    cudnn_benchmark=True,
    mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
    dist_cfg=dict(backend='nccl'))
vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(
    type='SegLocalVisualizer', vis_backends=vis_backends, name='visualizer')
log_processor = dict(by_epoch=True)
log_level = 'INFO'
load_from = None
resume = False
default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=50),
    param_scheduler=dict(type='ParamSchedulerHook'),
    # A checkpoint every epoch (official); keep the last 3 and the best.
    checkpoint=dict(
        type='CheckpointHook', by_epoch=True, interval=1, max_keep_ckpts=3,
        # crash-safe writes: sapiens_mm.engine.fileio.AtomicLocalBackend
        backend_args=dict(backend='sapiens_atomic_local')),
    sampler_seed=dict(type='DistSamplerSeedHook'))
