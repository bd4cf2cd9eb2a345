# Runtime shared by the 2D pose configs (mmpose scope).
custom_imports = dict(imports=['sapiens_mm'], allow_failed_imports=False)
default_scope = 'mmpose'
# Top-down (one crop per person box), read by mmpose's MMPoseInferencer.
data_mode = 'topdown'
default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=50),
    param_scheduler=dict(type='ParamSchedulerHook'),
    # Every 10 epochs, keep the last and the best. 'auto' picks the first
    # metric, i.e. the overall AP: coco/AP, coco-wholebody/AP or goliath/AP.
    checkpoint=dict(
        type='CheckpointHook',
        interval=10,
        max_keep_ckpts=1,
        save_best='auto',
        rule='greater',
        # crash-safe writes: sapiens_mm.engine.fileio.AtomicLocalBackend
        backend_args=dict(backend='sapiens_atomic_local')),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    visualization=dict(type='PoseVisualizationHook', enable=False))
env_cfg = dict(
    cudnn_benchmark=False,
    mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
    dist_cfg=dict(backend='nccl'))
vis_backends = [dict(type='LocalVisBackend')]
visualizer = dict(
    type='PoseLocalVisualizer', vis_backends=vis_backends, name='visualizer')
log_processor = dict(
    type='LogProcessor', window_size=50, by_epoch=True, num_digits=6)
log_level = 'INFO'
load_from = None
resume = False
backend_args = dict(backend='local')
