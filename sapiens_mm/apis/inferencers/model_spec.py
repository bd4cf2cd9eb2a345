"""What the user names as models -> (task, config, checkpoint) per task.

A spec is an official Sapiens checkpoint file alone (task and size from its
name or, failing that, its weights; the shipped config is used), a released
model by registry name, alias or Hub repository id (``'sapiens2-pose-0.4b'``,
``'facebook/sapiens2-pose-0.4b'``, downloaded once; its registry config is
used; see :mod:`sapiens_mm.zoo`), a config (file or
:class:`~mmengine.config.Config`, random weights), a
``dict(config=..., checkpoint=...)`` or a ``(config, checkpoint)`` pair. The
checkpoint may be an exported ``.onnx`` / ``.pt2`` model: its task and
config are read from the file; or a Hugging Face Transformers Sapiens2
checkpoint (a folder, or its ``model.safetensors``).

A checkpoint file alone is built with, in this order of preference: the
config it carries as data (checkpoints saved by ``tools/train.py`` and
``make demo``; see :func:`~sapiens_mm.zoo.checkpoint_config`), or the
shipped config of the task and size told by its official file name or,
failing that, its weights. The weights must then fit that shipped config; if
they do not, the error names the config options that differ
(:class:`~sapiens_mm.zoo.ConfigMismatchError`).
"""
import os.path as osp
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Mapping, Optional, Sequence, Union

import torch

from mmengine.config import Config

from sapiens_mm.checkpoint import get_state_dict, load_file
from sapiens_mm.deploy.metadata import read_metadata
from sapiens_mm.deploy.runtime import is_exported_model
from sapiens_mm.deploy.safe_load import config_from_data
from sapiens_mm.tasks import TASKS, task_of_config
from sapiens_mm.utils.commands import python_command
from sapiens_mm.zoo import (
    ConfigMismatchError,
    ModelCard,
    SapiensModelInfo,
    checkpoint_config,
    config_mismatches,
    lookup_card,
    parse_checkpoint_name,
    recognize_state_dict,
    resolve_checkpoint,
)

from ..inference import load_config

__all__ = [
    'ModelSpec', 'ResolvedModel', 'resolve_model', 'resolve_models',
    'task_of_checkpoint', 'registry_weights_mismatch'
]

ModelSpec = Union[str, Path, Config, dict, tuple]
_EXAMPLE = 'sapiens_0.3b_goliath_best_goliath_AP_573.pth'


@dataclass
class ResolvedModel:
    """One model to build.

    Attributes:
        task: Its task.
        cfg: Its config.
        checkpoint: Checkpoint / exported file, or None (random weights).
        state_dict: The weights when they were already read (to recognise
            a renamed official checkpoint), else None.
        info: Model zoo facts when recognised from the checkpoint alone.
    """
    task: str
    cfg: Config
    checkpoint: Optional[str] = None
    state_dict: Optional[dict] = None
    info: Optional[SapiensModelInfo] = None

    @property
    def weights(self):
        """What :func:`~sapiens_mm.apis.inference.init_model` loads."""
        return self.state_dict if self.state_dict is not None else \
            self.checkpoint


def _check_task(task: Optional[str], where: str) -> None:
    if task is not None and task not in TASKS:
        raise ValueError(f'Unknown task {task!r} in {where}; use one of '
                         f'{", ".join(TASKS)}.')


def task_of_checkpoint(path: Union[str, Path]) -> str:
    """The task of a checkpoint, as :func:`resolve_model` builds it: a
    registry model's, an exported model's metadata, else the config a
    checkpoint carries as data, else the model zoo's recognition (official
    name, then weights).

    Raises:
        FileNotFoundError: No such file.
        ValueError: An exported file without valid metadata.
        UnrecognizedCheckpointError: The task cannot be told.
        UnsafeModelError: A stored config that could run code.
    """
    path = str(path)
    if is_exported_model(path):
        return read_metadata(path)['task']
    card = lookup_card(path.partition('@')[0])
    if card is not None and not osp.exists(path):
        return card.task  # a registry model: no download needed
    info = parse_checkpoint_name(path)
    if info is not None:  # an official file name: nothing to read
        return info.task
    local = resolve_checkpoint(path)[0]
    loaded = load_file(str(local))
    cfg = checkpoint_config(loaded, str(local))
    if cfg is not None:
        return task_of_config(cfg)
    return recognize_state_dict(get_state_dict(loaded), source=str(local)).task


def _info_of_card(card: ModelCard) -> SapiensModelInfo:
    """The model facts of a registry model sapiens_mm runs.

    Raises:
        ValueError: A model without a runnable config (a pretraining
            backbone, a compiled Sapiens-lite graph, the detector).
    """
    if not card.runnable:
        raise ValueError(
            f'{card.name} is a {card.task} model in the {card.format} '
            'format, which the inferencers do not run; name a task model '
            f'(`{python_command()} tools/download.py --list` lists them).')
    dataset = card.dataset if card.task in ('pose', 'seg') else None
    return SapiensModelInfo(card.task, card.size, dataset, 'registry',
                            card.version, card.name)


def registry_weights_mismatch(cfg: Config, checkpoint: str,
                              info: SapiensModelInfo
                              ) -> Optional[ConfigMismatchError]:
    """Why the weights of a registry model do not fit its registry config,
    as a :class:`~sapiens_mm.zoo.ConfigMismatchError` (the config options
    that differ, and how many weights either side lacks, with an example);
    None when they fit. Read after the model failed to load: the file is
    read once more, on this error path only.

    Args:
        cfg: The registry config.
        checkpoint: The downloaded file.
        info: The model's facts (its registry name).
    """
    from mmengine.registry import DefaultScope

    from sapiens_mm.checkpoint import read_checkpoint
    from sapiens_mm.tasks import TASK_SCOPES
    with DefaultScope.overwrite_default_scope(TASK_SCOPES[info.task]), \
            torch.device('meta'):
        if info.task == 'pose':
            from mmpose.registry import MODELS
        else:
            from mmseg.registry import MODELS
        skeleton = MODELS.build(cfg.model)
    state = read_checkpoint(checkpoint, skeleton)[1]
    name = osp.basename(cfg.filename or 'the registry config')
    differences = config_mismatches(state, cfg, name)
    own = skeleton.state_dict()
    for keys, where in (([k for k in own if k not in state],
                         f'{name} has that the file lacks'),
                        ([k for k in state if k not in own],
                         f'the file has that {name} lacks')):
        if keys:
            differences.append(f'{len(keys)} weights {where} (e.g. '
                               f'{keys[0]})')
    if not differences:
        return None
    return ConfigMismatchError(info.name or checkpoint, info.task, name,
                               differences)


def _resolve_exported(checkpoint: str, config,
                      task_hint: Optional[str]) -> ResolvedModel:
    meta = read_metadata(checkpoint)
    # data only: a stored config is never executed
    cfg = config_from_data(meta.get('config'), checkpoint) if config is None \
        else load_config(config)
    task = task_of_config(cfg)
    if task != meta['task']:
        raise ValueError(f'{checkpoint} is a {meta["task"]} model but its '
                         f'config is a {task} config.')
    if task_hint is not None and task != task_hint:
        raise ValueError(f'The model given for {task_hint!r} is a {task} '
                         f'model ({checkpoint}).')
    return ResolvedModel(task, cfg, checkpoint)


def resolve_model(spec: ModelSpec,
                  task_hint: Optional[str] = None) -> ResolvedModel:
    """Resolve one model spec (see the module docstring).

    Args:
        spec: The spec.
        task_hint: The task it was given for, checked against its config.

    Raises:
        FileNotFoundError: A missing checkpoint or config.
        ValueError: A spec of the wrong task, or with unknown keys.
        TypeError: Something that is not a spec.
        UnknownModelError: A checkpoint that is neither a file nor a
            registry model (the closest names are suggested).
        HubError: A registry model could not be downloaded (one line).
        UnrecognizedCheckpointError: A checkpoint alone whose task and size
            cannot be told.
        ConfigMismatchError: A checkpoint file alone, without a config as
            data, whose weights do not fit the shipped config of its task
            and size.
    """
    _check_task(task_hint, 'models')
    config = checkpoint = None
    if isinstance(spec, dict):
        unknown = set(spec) - {'config', 'checkpoint'}
        if unknown:
            raise ValueError(f'Model spec keys {sorted(unknown)} are not '
                             'known; use config= and checkpoint=.')
        config, checkpoint = spec.get('config'), spec.get('checkpoint')
    elif isinstance(spec, (tuple, list)) and len(spec) == 2:
        config, checkpoint = spec
    elif isinstance(spec, Config) or str(spec).endswith('.py'):
        config = spec
    elif isinstance(spec, (str, Path)):
        checkpoint = spec
    else:
        raise TypeError(f'Cannot use {spec!r} as a model: give a checkpoint '
                        'path, a config path, dict(config=..., checkpoint=...)'
                        ' or (config, checkpoint).')
    if config is None and checkpoint is None:
        raise ValueError('A model spec needs a config or a checkpoint.')
    card = None
    if checkpoint is not None:
        # a local file or folder, or a registry model (downloaded)
        checkpoint, card = resolve_checkpoint(str(checkpoint))
        if is_exported_model(checkpoint):
            return _resolve_exported(checkpoint, config, task_hint)
    state_dict = info = None
    if config is None and card is not None:
        info = _info_of_card(card)
        cfg = load_config(card.config)
    elif config is None:
        info = parse_checkpoint_name(checkpoint)
        if info is not None:
            cfg = load_config(info.config)
        else:
            loaded = load_file(checkpoint)
            state_dict = get_state_dict(loaded)
            cfg = checkpoint_config(loaded, checkpoint)
            if cfg is None:
                info = recognize_state_dict(state_dict, source=checkpoint)
                cfg = load_config(info.config)
                differences = config_mismatches(state_dict, cfg,
                                                info.config.name)
                if differences:
                    raise ConfigMismatchError(checkpoint, info.task,
                                              info.config.name, differences)
    else:
        cfg = load_config(config)
    task = task_of_config(cfg)
    if task_hint is not None and task != task_hint:
        raise ValueError(f'The model given for {task_hint!r} is a {task} '
                         f'model ({checkpoint or config}).')
    return ResolvedModel(task, cfg, checkpoint, state_dict, info)


def resolve_models(
    models: Union[Mapping[str, ModelSpec], Sequence[ModelSpec], ModelSpec],
    tasks: Optional[Sequence[str]] = None
) -> Dict[str, ResolvedModel]:
    """Resolve the models of an inferencer, one per task.

    Args:
        models: A mapping ``{task: spec}``, a list of specs or one spec.
        tasks: Keep only these tasks (each must have a model). None: all.

    Returns:
        ``{task: ResolvedModel}``.

    Raises:
        ValueError: No model, two models for one task, a task without a
            model, or an unknown task.
    """
    if tasks is not None:
        tasks = (tasks, ) if isinstance(tasks, str) else tuple(tasks)
        bad = [t for t in tasks if t not in TASKS]
        if bad:
            raise ValueError(f'Unknown task(s) {bad}; choose from '
                             f'{", ".join(TASKS)}.')
    if isinstance(models, Mapping) and not (set(models) & {'config',
                                                           'checkpoint'}):
        items = list(models.items())
    else:
        if isinstance(models, (str, Path, Config, dict)) or (
                isinstance(models, tuple) and len(models) == 2 and
            (isinstance(models[0], Config) or str(models[0]).endswith('.py'))):
            models = [models]
        items = [(None, spec) for spec in models]
    resolved: Dict[str, ResolvedModel] = {}
    for task_hint, spec in items:
        model = resolve_model(spec, task_hint)
        if model.task in resolved:
            raise ValueError(f'Two models were given for the {model.task} '
                             'task; keep one.')
        resolved[model.task] = model
    if not resolved:
        raise ValueError(f'No model given: pass e.g. models=["{_EXAMPLE}"].')
    if tasks is not None:
        missing = [t for t in tasks if t not in resolved]
        if missing:
            raise ValueError(
                f'No model for task(s) {missing}: add them to models, e.g. '
                'models={"seg": "sapiens_0.3b_goliath_best_goliath_mIoU_'
                '7673_epoch_194.pth"}.')
        resolved = {t: m for t, m in resolved.items() if t in tasks}
    return resolved
