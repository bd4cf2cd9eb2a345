# Runtime of the Sapiens2 seg configs: the v1 one, by iteration (the
# Sapiens2 schedules are iteration based): a checkpoint every 1000
# iterations, keep the last 3 (and the best, as set by the task config).
_base_ = ['./seg_runtime.py']
default_hooks = dict(
    checkpoint=dict(by_epoch=False, interval=1000, max_keep_ckpts=3))
log_processor = dict(by_epoch=False)
