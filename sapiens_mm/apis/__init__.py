from .runner_cfg import (amp_dtype, build_test_cfg, build_train_cfg,
                         default_work_dir, enable_amp)

__all__ = [
    'amp_dtype', 'build_test_cfg', 'build_train_cfg', 'default_work_dir',
    'enable_amp'
]
