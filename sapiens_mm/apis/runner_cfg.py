"""Turn ``tools/train.py`` / ``tools/test.py`` arguments into a Runner config.

Kept in the package (not in the scripts) so it is tested.
"""
import os.path as osp
from typing import Optional

import torch
from mmengine.config import Config, DictAction  # noqa: F401 (re-export)


def default_work_dir(config_path: str) -> str:
    """``./work_dirs/<config name>``, mmengine's convention."""
    return osp.join('./work_dirs', osp.splitext(osp.basename(config_path))[0])


def amp_dtype() -> str:
    """``'float16'`` on a CUDA device that runs it, else ``'bfloat16'``."""
    if torch.cuda.is_available():
        return 'float16'
    return 'bfloat16'


def enable_amp(cfg: Config) -> None:
    """Switch the config's optimizer wrapper to mixed precision.

    On CUDA: mmengine's ``AmpOptimWrapper``, fp16 with dynamic loss scaling.
    Elsewhere (CPU), where fp16 training is not supported:
    :class:`~sapiens_mm.engine.AutocastOptimWrapper` with bf16 autocast.
    """
    wrapper = cfg.optim_wrapper
    kind = wrapper.get('type', 'OptimWrapper')
    if kind in ('AmpOptimWrapper', 'AutocastOptimWrapper'):
        return
    if kind != 'OptimWrapper':
        raise ValueError(f'--amp cannot convert optim_wrapper type {kind}; '
                         'set AmpOptimWrapper in the config instead.')
    if amp_dtype() == 'float16':
        wrapper.type = 'AmpOptimWrapper'
        wrapper.dtype = 'float16'
        wrapper.loss_scale = 'dynamic'
    else:
        wrapper.type = 'AutocastOptimWrapper'
        wrapper.dtype = 'bfloat16'


def build_train_cfg(config: str,
                    work_dir: Optional[str] = None,
                    resume: Optional[str] = None,
                    amp: bool = False,
                    auto_scale_lr: bool = False,
                    cfg_options: Optional[dict] = None,
                    launcher: str = 'none',
                    seed: Optional[int] = None,
                    deterministic: bool = False) -> Config:
    """Load ``config`` and apply the ``tools/train.py`` options."""
    cfg = Config.fromfile(config)
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    cfg.launcher = launcher
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get('work_dir') is None:
        cfg.work_dir = default_work_dir(config)
    if amp:
        enable_amp(cfg)
    if auto_scale_lr:
        if 'auto_scale_lr' not in cfg or 'base_batch_size' not in (
                cfg.auto_scale_lr or {}):
            raise ValueError(
                '--auto-scale-lr needs `auto_scale_lr = dict('
                'base_batch_size=...)` in the config.')
        cfg.auto_scale_lr.enable = True
    if resume == 'auto':
        cfg.resume = True
        cfg.load_from = None
    elif resume is not None:
        cfg.resume = True
        cfg.load_from = resume
    if seed is not None or deterministic:
        randomness = dict(cfg.get('randomness') or {})
        if seed is not None:
            randomness['seed'] = seed
        if deterministic:
            randomness['deterministic'] = True
        cfg.randomness = randomness
    return cfg


def build_test_cfg(config: str,
                   checkpoint: str,
                   work_dir: Optional[str] = None,
                   cfg_options: Optional[dict] = None,
                   launcher: str = 'none') -> Config:
    """Load ``config`` for evaluating ``checkpoint`` (``tools/test.py``)."""
    cfg = Config.fromfile(config)
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    cfg.launcher = launcher
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get('work_dir') is None:
        cfg.work_dir = default_work_dir(config)
    cfg.load_from = checkpoint
    cfg.resume = False
    return cfg
