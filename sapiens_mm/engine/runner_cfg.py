"""Turn ``tools/train.py`` / ``tools/test.py`` arguments into a Runner config.

Kept in the package (not in the scripts) so it is tested.
"""
import datetime
import json
import os
import os.path as osp
import subprocess
from typing import Any, Dict, Iterator, Literal, Optional

import torch
import torch.distributed as dist
from mmengine.config import Config, DictAction  # noqa: F401 (re-export)
from mmengine.logging import print_log

from sapiens_mm.engine.fileio import (
    atomic_write,
    check_resumable,
    ensure_writable_dir,
    find_resumable_checkpoint,
    remove_stale_temp_files,
)

__all__ = [
    'default_work_dir', 'load_runner_config', 'amp_dtype', 'enable_amp',
    'adapt_fsdp', 'resolve_auto_resume', 'add_training_hooks', 'adapt_cpu_distributed',
    'init_cpu_distributed', 'build_runner', 'write_metrics_json',
    'build_train_cfg', 'build_test_cfg', 'prepare_work_dir',
    'explain_json_error'
]


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
    if kind in ('AmpOptimWrapper', 'AutocastOptimWrapper',
                'FSDPAmpOptimWrapper'):
        return
    if kind not in ('OptimWrapper', 'FSDPOptimWrapper'):
        raise ValueError(f'--amp cannot convert optim_wrapper type {kind}; '
                         'set AmpOptimWrapper in the config instead.')
    if amp_dtype() == 'float16':
        wrapper.type = 'AmpOptimWrapper'
        wrapper.dtype = 'float16'
        wrapper.loss_scale = 'dynamic'
    else:
        wrapper.type = 'AutocastOptimWrapper'
        wrapper.dtype = 'bfloat16'
    adapt_fsdp(cfg)


def _is_fsdp(cfg: Config) -> bool:
    strategy = cfg.get('strategy') or {}
    return str(strategy.get('type', '')).split('.')[-1] == 'FSDPStrategy'


def adapt_fsdp(cfg: Config) -> None:
    """Give an FSDP config (``strategy=dict(type='FSDPStrategy')``) the
    optim wrapper that clips by the global gradient norm.

    ``OptimWrapper`` becomes :class:`~sapiens_mm.engine.FSDPOptimWrapper`
    and ``AmpOptimWrapper`` :class:`~sapiens_mm.engine.FSDPAmpOptimWrapper`
    (mmengine's own would clip each rank's shard by its local norm).
    Other configs are left alone.
    """
    if not _is_fsdp(cfg) or cfg.get('optim_wrapper') is None:
        return
    wrapper = cfg.optim_wrapper
    kind = wrapper.get('type', 'OptimWrapper')
    if kind == 'OptimWrapper':
        wrapper.type = 'FSDPOptimWrapper'
    elif kind == 'AmpOptimWrapper':
        wrapper.type = 'FSDPAmpOptimWrapper'
        wrapper.use_fsdp = True


def resolve_auto_resume(cfg: Config) -> Optional[str]:
    """Apply ``--resume auto`` to ``cfg``: resume from the latest complete
    checkpoint of ``cfg.work_dir``.

    The checkpoint is picked by
    :func:`~sapiens_mm.engine.find_resumable_checkpoint` (which skips a
    truncated file or a broken ``last_checkpoint`` entry) and set as
    ``load_from`` with ``resume=True``. With nothing to resume, the run
    starts fresh: from the config's ``load_from`` (fine-tuning init) when
    it has one, else from scratch.

    Returns:
        The checkpoint resumed from, or None.
    """
    path = find_resumable_checkpoint(cfg.work_dir)
    if path is not None:
        cfg.resume = True
        cfg.load_from = path
    elif cfg.get('load_from') or osp.isfile(
            osp.join(cfg.work_dir, 'last_checkpoint')):
        # Nothing complete to resume from: a plain start (keeps load_from;
        # mmengine would otherwise follow a broken last_checkpoint).
        cfg.resume = False
        print_log(f'--resume auto: no checkpoint in {cfg.work_dir}; '
                  'starting a new run.', logger='current')
    else:
        cfg.resume = True
        cfg.load_from = None
    return path


def _has_hook(hooks, name: str) -> bool:
    return any(
        isinstance(h, dict) and str(h.get('type', '')).split('.')[-1] == name
        for h in hooks)


def add_training_hooks(cfg: Config,
                       nonfinite_loss: Optional[str] = None) -> None:
    """Add :class:`~sapiens_mm.engine.ReseedHook`,
    :class:`~sapiens_mm.engine.BestCheckpointGuardHook`,
    :class:`~sapiens_mm.engine.NonFiniteLossHook` and
    :class:`~sapiens_mm.engine.ConfigDataHook` (checkpoints carry their
    config as data) to ``custom_hooks`` unless the config already has them.

    Args:
        cfg: Training config, changed in place.
        nonfinite_loss: ``'stop'`` / ``'skip'``: action of the
            NonFiniteLossHook (also overrides the config's own hook).
            None keeps the config's hook, or adds one with ``'stop'``.
    """
    if nonfinite_loss not in (None, 'stop', 'skip'):
        raise ValueError(f"nonfinite_loss must be 'stop' or 'skip', got "
                         f'{nonfinite_loss!r}.')
    hooks = list(cfg.get('custom_hooks') or [])
    if not _has_hook(hooks, 'ReseedHook'):
        hooks.append(dict(type='ReseedHook'))
    if not _has_hook(hooks, 'BestCheckpointGuardHook'):
        hooks.append(dict(type='BestCheckpointGuardHook'))
    if not _has_hook(hooks, 'ConfigDataHook'):
        hooks.append(dict(type='ConfigDataHook'))
    if not _has_hook(hooks, 'NonFiniteLossHook'):
        hooks.append(
            dict(type='NonFiniteLossHook', action=nonfinite_loss or 'stop'))
    elif nonfinite_loss is not None:
        for h in hooks:
            if str(h.get('type', '')).split('.')[-1] == 'NonFiniteLossHook':
                h['action'] = nonfinite_loss
    cfg.custom_hooks = hooks


def adapt_cpu_distributed(cfg: Config) -> None:
    """Make a distributed config run on CPU-only machines.

    With a launcher and no CUDA device: the ``nccl`` backend (GPU only)
    becomes ``gloo``, and ``MMDistributedDataParallel`` gets
    ``device_ids=None`` (mmengine passes ``[LOCAL_RANK]``, which DDP refuses
    for CPU modules). Nothing changes when CUDA is available.
    """
    if cfg.get('launcher', 'none') == 'none' or torch.cuda.is_available():
        return
    env_cfg = cfg.setdefault('env_cfg', {})
    dist_cfg = env_cfg.setdefault('dist_cfg', {})
    if dist_cfg.get('backend', 'nccl') == 'nccl':
        dist_cfg['backend'] = 'gloo'
    if _is_fsdp(cfg):
        # mmengine passes device_id=LOCAL_RANK (a CUDA index) to FSDP.
        cfg.strategy.setdefault('model_wrapper', {})['device_id'] = 'cpu'
        return
    if cfg.get('runner_type') or cfg.get('strategy'):
        return  # other FlexibleRunner strategies choose their own devices
    wrapper = cfg.get('model_wrapper_cfg') or dict(
        type='MMDistributedDataParallel',
        broadcast_buffers=False,
        find_unused_parameters=cfg.get('find_unused_parameters', False))
    if str(wrapper.get('type', 'MMDistributedDataParallel')).split(
            '.')[-1] in ('MMDistributedDataParallel',
                         'DistributedDataParallel'):
        wrapper['device_ids'] = None
    cfg.model_wrapper_cfg = wrapper


def init_cpu_distributed(cfg: Config) -> bool:
    """Start the process group of a CPU-only distributed run.

    mmengine's ``init_dist`` calls ``torch.cuda.set_device`` first, which
    fails on a machine without a GPU. Here the group is started directly
    (backend from ``env_cfg.dist_cfg``, ``gloo`` after
    :func:`adapt_cpu_distributed`); the Runner then finds it running and
    skips its own set-up. Rank and world size come from torchrun
    (``--launcher pytorch``), SLURM (``SLURM_PROCID`` / ``SLURM_NTASKS`` /
    ``SLURM_NODELIST``, ``MASTER_PORT`` default 29500) or Open MPI
    (``OMPI_COMM_WORLD_*``, ``MASTER_ADDR`` / ``MASTER_PORT`` required).
    Does nothing with CUDA, without a launcher, or when a group exists.

    Returns:
        Whether a process group was started.
    """
    launcher = cfg.get('launcher', 'none')
    if (launcher == 'none' or torch.cuda.is_available()
            or dist.is_initialized()):
        return False
    dist_cfg = dict((cfg.get('env_cfg') or {}).get('dist_cfg') or {})
    backend = dist_cfg.pop('backend', 'gloo')
    kwargs = {}
    if dist_cfg.get('timeout') is not None:
        kwargs['timeout'] = datetime.timedelta(seconds=dist_cfg['timeout'])
    env = os.environ
    if launcher == 'slurm':
        nodes = env['SLURM_NODELIST']
        env.setdefault('MASTER_PORT', str(dist_cfg.get('port', 29500)))
        env.setdefault(
            'MASTER_ADDR',
            subprocess.getoutput(
                f'scontrol show hostname {nodes} | head -n1').strip())
        env['RANK'] = env['SLURM_PROCID']
        env['WORLD_SIZE'] = env['SLURM_NTASKS']
        env['LOCAL_RANK'] = env.get('SLURM_LOCALID', '0')
    elif launcher == 'mpi':
        env['RANK'] = env['OMPI_COMM_WORLD_RANK']
        env['WORLD_SIZE'] = env['OMPI_COMM_WORLD_SIZE']
        env['LOCAL_RANK'] = env['OMPI_COMM_WORLD_LOCAL_RANK']
        if 'MASTER_ADDR' not in env or 'MASTER_PORT' not in env:
            raise RuntimeError('--launcher mpi on CPU needs MASTER_ADDR and '
                               'MASTER_PORT in the environment.')
    elif launcher != 'pytorch':
        raise ValueError(f'Unknown launcher {launcher!r}; use none, '
                         'pytorch, slurm or mpi.')
    dist.init_process_group(
        backend=backend,
        rank=int(env['RANK']),
        world_size=int(env['WORLD_SIZE']),
        **kwargs)
    return True


def build_runner(cfg: Config):
    """``Runner.from_cfg(cfg)``, or ``RUNNERS.build(cfg)`` when the config
    sets ``runner_type`` (e.g. ``'FlexibleRunner'`` for FSDP / DeepSpeed
    strategies), as upstream OpenMMLab tools do. On a CPU-only machine the
    process group of a distributed run is started first
    (:func:`init_cpu_distributed`)."""
    init_cpu_distributed(cfg)
    if cfg.get('runner_type'):
        from mmengine.registry import RUNNERS
        return RUNNERS.build(cfg)
    from mmengine.runner import Runner
    return Runner.from_cfg(cfg)


def _to_builtin(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _to_builtin(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_builtin(v) for v in value]
    if isinstance(value, torch.Tensor):
        return _to_builtin(value.tolist())
    if hasattr(value, 'item') and callable(value.item):  # numpy scalars
        try:
            return value.item()
        except (TypeError, ValueError):
            pass
    if hasattr(value, 'tolist'):  # numpy arrays
        return value.tolist()
    return value


def write_metrics_json(metrics: Dict[str, Any], path: str, config: str,
                       checkpoint: str) -> Dict[str, Any]:
    """Write test metrics as JSON (atomically).

    The file holds ``{"config": ..., "checkpoint": ..., "metrics":
    {name: value}}``; numpy / tensor values become plain numbers or lists.

    Returns:
        The written object.
    """
    record = dict(
        config=config, checkpoint=checkpoint, metrics=_to_builtin(metrics))
    atomic_write(json.dumps(record, indent=2) + '\n', path)
    return record


def load_runner_config(config: str, cfg_options: Optional[dict],
                       launcher: str, work_dir: Optional[str]) -> Config:
    """``config`` with ``cfg_options`` merged in, its ``launcher`` set and
    its ``work_dir``: ``work_dir`` when given, else the config's own, else
    :func:`default_work_dir`. The common start of :func:`build_train_cfg`
    and :func:`build_test_cfg`."""
    cfg = Config.fromfile(config)
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    cfg.launcher = launcher
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get('work_dir') is None:
        cfg.work_dir = default_work_dir(config)
    return cfg


def build_train_cfg(config: str,
                    work_dir: Optional[str] = None,
                    resume: Optional[str] = None,
                    amp: bool = False,
                    auto_scale_lr: bool = False,
                    cfg_options: Optional[dict] = None,
                    launcher: str = 'none',
                    seed: Optional[int] = None,
                    deterministic: bool = False,
                    nonfinite_loss: Optional[Literal['stop', 'skip']] = None
                    ) -> Config:
    """Load ``config`` and apply the ``tools/train.py`` options.

    Args:
        config: Path of the config file.
        work_dir: Output folder; defaults to the config's ``work_dir`` or
            ``./work_dirs/<config name>``.
        resume: ``'auto'`` resumes from the latest complete checkpoint of
            ``work_dir`` (see :func:`resolve_auto_resume`), a path resumes
            from that checkpoint (a training checkpoint of mmengine's
            Runner: plain weights are refused, see
            :func:`~sapiens_mm.engine.fileio.check_resumable`).
        amp: Mixed precision (see :func:`enable_amp`).
        auto_scale_lr: Scale the learning rate by the actual total batch
            size over ``auto_scale_lr.base_batch_size``.
        cfg_options: ``key=value`` overrides (applied first).
        launcher: ``'none' | 'pytorch' | 'slurm' | 'mpi'``.
        seed: Random seed (``randomness.seed``).
        deterministic: Deterministic algorithms (``randomness``).
        nonfinite_loss: Action of the :class:`NonFiniteLossHook` added to
            every run: ``'stop'`` (the default, unless the config has its
            own hook) or ``'skip'``.

    Besides the options, the returned config always has a
    :class:`~sapiens_mm.engine.ReseedHook` (exact resume), a
    :class:`~sapiens_mm.engine.NonFiniteLossHook` and a
    :class:`~sapiens_mm.engine.ConfigDataHook` (the config as data in every
    checkpoint) in ``custom_hooks``, and
    is adapted to FSDP (:func:`adapt_fsdp`) and to CPU-only distributed
    runs (:func:`adapt_cpu_distributed`).
    """
    cfg = load_runner_config(config, cfg_options, launcher, work_dir)
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
        resolve_auto_resume(cfg)
    elif resume is not None:
        check_resumable(resume)
        cfg.resume = True
        cfg.load_from = resume
    if seed is not None or deterministic:
        randomness = dict(cfg.get('randomness') or {})
        if seed is not None:
            randomness['seed'] = seed
        if deterministic:
            randomness['deterministic'] = True
        cfg.randomness = randomness
    add_training_hooks(cfg, nonfinite_loss)
    adapt_fsdp(cfg)
    adapt_cpu_distributed(cfg)
    return cfg


def build_test_cfg(config: str,
                   checkpoint: str,
                   work_dir: Optional[str] = None,
                   cfg_options: Optional[dict] = None,
                   launcher: str = 'none',
                   dump: Optional[str] = None,
                   strict: bool = True,
                   inference_form: bool = False) -> Config:
    """Load ``config`` for evaluating ``checkpoint`` (``tools/test.py``).

    Args:
        config: Path of the config file.
        checkpoint: Checkpoint to evaluate.
        work_dir: Output folder; defaults as in :func:`build_train_cfg`.
        cfg_options: ``key=value`` overrides (applied first).
        launcher: ``'none' | 'pytorch' | 'slurm' | 'mpi'``.
        dump: Write every prediction to this ``.pkl`` file (mmengine's
            ``DumpResults`` metric is added to ``test_evaluator``).
        strict: Refuse a checkpoint that does not fit the model (missing,
            unexpected or wrong-shape keys): a
            :class:`~sapiens_mm.engine.StrictLoadHook` is added to
            ``custom_hooks``. False only warns. NaN / inf weights are
            refused either way. Defaults to True.
        inference_form: Run the test loop on the model's inference form:
            a :class:`~sapiens_mm.engine.InferenceFormHook` for the test
            loop is added to ``custom_hooks`` unless the config has one.
            Defaults to False.
    """
    cfg = load_runner_config(config, cfg_options, launcher, work_dir)
    cfg.load_from = checkpoint
    cfg.resume = False
    hooks = [h for h in (cfg.get('custom_hooks') or [])
             if not _has_hook([h], 'StrictLoadHook')]
    cfg.custom_hooks = hooks + [
        dict(type='StrictLoadHook', strict=bool(strict), source=checkpoint)
    ]
    if inference_form and not _has_hook(hooks, 'InferenceFormHook'):
        cfg.custom_hooks.append(dict(type='InferenceFormHook', val=False))
    if dump is not None:
        if not dump.endswith(('.pkl', '.pickle')):
            raise ValueError(f'--dump must name a .pkl file, got {dump!r}.')
        if cfg.get('test_evaluator') is None:
            raise ValueError('--dump needs a test_evaluator in the config.')
        evaluator = cfg.test_evaluator
        if isinstance(evaluator, dict) and 'metrics' not in evaluator:
            evaluator = [evaluator]
        dump_metric = dict(type='DumpResults', out_file_path=dump)
        if isinstance(evaluator, dict):  # dict(type='Evaluator', metrics=..)
            metrics = evaluator['metrics']
            metrics = list(metrics) if isinstance(metrics,
                                                  (list, tuple)) else [metrics]
            evaluator['metrics'] = metrics + [dump_metric]
        else:
            evaluator = list(evaluator) + [dump_metric]
        cfg.test_evaluator = evaluator
    adapt_cpu_distributed(cfg)
    return cfg


def prepare_work_dir(cfg: Config) -> str:
    """Before a run: check that ``cfg.work_dir`` can be written (a clear
    error now instead of a raw ``OSError`` from the Runner) and remove the
    temporary files an interrupted checkpoint save left in it
    (:func:`~sapiens_mm.engine.remove_stale_temp_files`).

    Returns:
        The work dir.

    Raises:
        OSError: It cannot be created or written to.
    """
    ensure_writable_dir(cfg.work_dir, 'work dir (--work-dir)')
    remove_stale_temp_files(cfg.work_dir)
    return cfg.work_dir


def _json_files(node: Any, data_root: Optional[str] = None) -> Iterator[str]:
    """Paths of the ``.json`` files a config names (``ann_file`` and the
    like, joined with the enclosing ``data_root``)."""
    if isinstance(node, dict):
        root = node.get('data_root', data_root)
        root = root if isinstance(root, str) else data_root
        for value in node.values():
            if isinstance(value, str) and value.endswith('.json'):
                yield value if osp.isabs(value) or not root else osp.join(
                    root, value)
            else:
                yield from _json_files(value, root)
    elif isinstance(node, (list, tuple)):
        for value in node:
            yield from _json_files(value, data_root)


def explain_json_error(cfg: Config, error: json.JSONDecodeError) -> str:
    """A message for a bare ``JSONDecodeError`` raised while a Runner read
    the config's files: which file is not valid JSON.

    Returns:
        ``'Annotation file PATH is not valid JSON (...)'`` for the first
        broken file the config names, or a message with the decoder's error
        when none is found.
    """
    for path in dict.fromkeys(_json_files(cfg.to_dict())):
        if not osp.isfile(path):
            continue
        try:
            with open(path, encoding='utf-8') as f:
                json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            return (f'Annotation file {path} is not valid JSON ({e}); fix '
                    'or regenerate it.')
        except OSError:
            continue
    return (f'A JSON file read for this run is not valid JSON ({error}); '
            'check the annotation files of the config.')
