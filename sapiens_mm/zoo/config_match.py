"""Which config builds a checkpoint's model: the one it carries as data,
else a shipped config whose model its weights fit.

Checkpoints written with :class:`~sapiens_mm.engine.ConfigDataHook`
(``tools/train.py``, ``make demo``) carry their resolved config as data
(:func:`checkpoint_config` reads it back, executing nothing). Others are
recognised by name or weights (:mod:`.model_zoo`) and built with a shipped
config; :func:`config_mismatches` says which config options the weights do
not fit (a run that changed, e.g., the head width), and
:class:`ConfigMismatchError` carries that to the user.
"""
import copy
import re
from typing import Any, Dict, List, Mapping, Optional

import torch
from mmengine.registry import DefaultScope

from sapiens_mm.checkpoint.config_data import config_from_data
from sapiens_mm.engine.hooks import CONFIG_DATA_KEY
from sapiens_mm.tasks import TASK_SCOPES, task_of_config

__all__ = ['ConfigMismatchError', 'checkpoint_config', 'config_mismatches']


class ConfigMismatchError(ValueError):
    """A checkpoint's weights do not fit the shipped config its task and size
    were recognised as (it was trained with a changed config).

    Attributes:
        checkpoint: The file.
        task: Its task.
        config: Name of the shipped config tried.
        differences: One line per differing config option (see
            :func:`config_mismatches`).
    """

    def __init__(self, checkpoint: str, task: str, config: str,
                 differences) -> None:
        self.checkpoint, self.task, self.config = checkpoint, task, config
        self.differences = list(differences)
        super().__init__(self.explain(
            f'dict(config=CFG, checkpoint={checkpoint!r}) as the {task} '
            'model'))

    def explain(self, how: str) -> str:
        """The message, ending with ``how`` to pass the right config
        (an API argument or a CLI option)."""
        return (f'{self.checkpoint} was recognised as a {self.task} model, '
                f'but its weights do not fit the shipped config '
                f'{self.config}: {"; ".join(self.differences)}. It was '
                'trained with another config and does not carry it as data '
                '(checkpoints saved by tools/train.py and make demo do); '
                f'pass that config: {how}.')


def checkpoint_config(checkpoint: Any, source: str):
    """The config a checkpoint carries as data, rebuilt without executing
    anything; None when it carries none.

    Checkpoints written by a run with
    :class:`~sapiens_mm.engine.ConfigDataHook` (``tools/train.py``,
    ``make demo``) hold ``meta['config_data']``
    (:func:`sapiens_mm.deploy.config_to_data`); mmengine's own
    ``meta['cfg']`` is Python text and is never read.

    Args:
        checkpoint: What :func:`sapiens_mm.checkpoint.load_file` read.
        source: The file, for messages.

    Returns:
        An mmengine ``Config``, or None.

    Raises:
        UnsafeModelError: The stored config names something that could run
            code (see :func:`sapiens_mm.deploy.config_from_data`).
    """
    meta = checkpoint.get('meta') if isinstance(checkpoint, Mapping) \
        else None
    data = meta.get(CONFIG_DATA_KEY) if isinstance(meta, Mapping) else None
    if data is None:
        return None
    return config_from_data(data, source)


def _head_options(cfg) -> Dict[str, Any]:
    model = cfg.model
    options = {}
    for part in ('head', 'decode_head', 'backbone'):
        for key, value in dict(model.get(part) or {}).items():
            options[f'model.{part}.{key}'] = value
    return options


def _option_for(key: str, cfg_dim: int, options: Dict[str, Any]
                ) -> Optional[str]:
    """The config option most likely to set the size ``cfg_dim`` of the
    parameter ``key``: an option holding that number, preferring one that
    shares a word with the parameter's layer name (``deconv_layers`` ->
    ``deconv_out_channels``)."""
    part = key.split('.')[0]
    words = set(re.split(r'[._]', key.split('.', 1)[1] if '.' in key
                         else key)) - {'weight', 'bias', 'layers'}
    best, best_score = None, -1
    for name, value in options.items():
        if name.split('.')[1] != part:
            continue
        values = value if isinstance(value, (tuple, list)) else (value, )
        if not any(isinstance(v, int) and not isinstance(v, bool)
                   and v == cfg_dim for v in values):
            continue
        score = len(words & set(name.split('.')[-1].split('_')))
        if score > best_score:
            best, best_score = name, score
    return best


def config_mismatches(state_dict: Mapping[str, torch.Tensor], cfg,
                      name: str = 'the config') -> List[str]:
    """How the weights of a checkpoint differ from the model of ``cfg``,
    one line per differing config option, e.g.
    ``model.head.deconv_out_channels 32 in the file, 64 in the config``.

    The model is built on PyTorch's ``meta`` device (shapes only, no
    memory). Position embeddings are left out (they are resized when
    loaded), and so are missing or extra keys (the strict loader of
    :func:`~sapiens_mm.apis.inference.init_model` names them).

    Args:
        state_dict: The checkpoint's weights.
        cfg: The config (mmengine ``Config``).
        name: What to call the config in the lines.

    Returns:
        The differences; empty when every weight fits.
    """
    task = task_of_config(cfg)
    model_cfg = copy.deepcopy(cfg.model)
    model_cfg.backbone.init_cfg = None
    with DefaultScope.overwrite_default_scope(TASK_SCOPES[task]), \
            torch.device('meta'):
        if task == 'pose':
            from mmpose.registry import MODELS
        else:
            from mmseg.registry import MODELS
        own = MODELS.build(model_cfg).state_dict()
    options = _head_options(cfg)
    differ = {}  # key -> (file shape, config shape, differing axes)
    for key, value in state_dict.items():
        if key not in own or key.endswith('pos_embed') or \
                tuple(value.shape) == tuple(own[key].shape):
            continue
        file_shape, cfg_shape = tuple(value.shape), tuple(own[key].shape)
        differ[key] = (file_shape, cfg_shape, [
            i for i, (a, b) in enumerate(zip(file_shape, cfg_shape)) if a != b
        ] if len(file_shape) == len(cfg_shape) else [])
    # A layer's output width is set by an option; the next layer's input
    # width follows from it: name the options of the outputs that differ.
    if any(axes[:1] == [0] for _, _, axes in differ.values()):
        differ = {k: v for k, v in differ.items() if v[2][:1] == [0]}
    lines: Dict[str, str] = {}
    for key, (file_shape, cfg_shape, axes) in differ.items():
        option = _option_for(key, cfg_shape[axes[0]], options) \
            if axes else None
        if option is not None and option not in lines:
            lines[option] = (f'{option} {file_shape[axes[0]]} in the file, '
                             f'{cfg_shape[axes[0]]} in {name}')
        elif option is None:
            lines[key] = (f'{key} {file_shape} in the file, {cfg_shape} in '
                          f'{name}')
    return list(lines.values())
