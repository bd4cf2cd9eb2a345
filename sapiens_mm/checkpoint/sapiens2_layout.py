"""The key layout of the official Sapiens2 ``.safetensors`` files.

- Pretrain files (``sapiens2_<size>_pretrain.safetensors``): the flat
  backbone state dict (``cls_token``, ``blocks.0.attn.wq.weight``, ...,
  ``rope_embed.periods``).
- Task files (``sapiens2_<size>_<task>.safetensors``): the estimator state
  dict, ``backbone.<key>`` plus ``decode_head.<key>``, for pose too (mmpose
  estimators call their head ``head``). There is no mmengine ``meta``.

:func:`from_official_layout` maps such a state dict onto a model's own names
and :func:`to_official_layout` / :func:`save_official_checkpoint` write a
model of this project in the official layout, which loads back strictly.
"""
from collections import OrderedDict
from typing import Dict, Optional

import torch
import torch.nn as nn

from .safetensors_io import save_safetensors

__all__ = ['from_official_layout', 'to_official_layout',
           'save_official_checkpoint', 'add_official_layout_hook',
           'official_head_keys']

_OFFICIAL_HEAD = 'decode_head.'
_MMPOSE_HEAD = 'head.'
#: State-dict entries that are not weights (mmengine preprocessors'
#: mean / std buffers); the official files have none.
_NOT_WEIGHTS = ('data_preprocessor.', )


def _renamed(state: Dict[str, torch.Tensor], old: str,
             new: str) -> 'OrderedDict[str, torch.Tensor]':
    return OrderedDict(
        (new + k[len(old):] if k.startswith(old) else k, v)
        for k, v in state.items())


def _has_child(model: nn.Module, name: str) -> bool:
    return isinstance(getattr(model, name, None), nn.Module)


def from_official_layout(state: Dict[str, torch.Tensor],
                         model: nn.Module) -> 'OrderedDict[str, torch.Tensor]':
    """Rename official task-file keys to ``model``'s names.

    ``decode_head.*`` becomes ``head.*`` when the model keeps its head as
    ``head`` (mmpose's estimators) and has no ``decode_head``; anything else
    is returned unchanged.
    """
    if any(k.startswith(_OFFICIAL_HEAD) for k in state) and \
            _has_child(model, 'head') and not _has_child(model, 'decode_head'):
        return _renamed(state, _OFFICIAL_HEAD, _MMPOSE_HEAD)
    return OrderedDict(state)


def official_head_keys(state: Dict[str, torch.Tensor]
                       ) -> 'OrderedDict[str, torch.Tensor]':
    """A task state dict with the official names: ``head.*`` (mmpose
    estimators of this project) renamed ``decode_head.*``, preprocessor
    buffers dropped; official state dicts come back unchanged."""
    state = OrderedDict((k, v) for k, v in state.items()
                        if not k.startswith(_NOT_WEIGHTS))
    if any(k.startswith(_MMPOSE_HEAD) for k in state) and \
            not any(k.startswith(_OFFICIAL_HEAD) for k in state):
        state = _renamed(state, _MMPOSE_HEAD, _OFFICIAL_HEAD)
    return state


def add_official_layout_hook(model: nn.Module) -> nn.Module:
    """Make every ``model.load_state_dict`` accept official task files.

    Registers a load-state-dict pre-hook that renames ``decode_head.*`` to
    ``head.*`` (as :func:`from_official_layout` does) in place, so that
    paths that do not go through :mod:`sapiens_mm.checkpoint` (mmengine's
    Runner ``load_from``, which loads non-strictly) load the head too. For
    models that keep their head as ``head`` (mmpose estimators); call it
    in the estimator's ``__init__``.

    Returns:
        ``model``.
    """

    def hook(module, state_dict, prefix, *args):
        if not (_has_child(module, 'head')
                and not _has_child(module, 'decode_head')):
            return
        old = prefix + _OFFICIAL_HEAD
        for k in [k for k in state_dict if k.startswith(old)]:
            state_dict[prefix + _MMPOSE_HEAD + k[len(old):]] = \
                state_dict.pop(k)

    model.register_load_state_dict_pre_hook(hook)
    return model


def to_official_layout(model: nn.Module) -> 'OrderedDict[str, torch.Tensor]':
    """``model``'s state dict in the official layout.

    A backbone gives its flat keys; a task model ``backbone.*`` plus
    ``decode_head.*`` (``head.*`` renamed), without preprocessor buffers.
    """
    return official_head_keys(model.state_dict())


def save_official_checkpoint(model: nn.Module, path: str,
                             metadata: Optional[Dict[str, str]] = None
                             ) -> 'OrderedDict[str, torch.Tensor]':
    """Write ``model`` as an official-layout ``.safetensors`` file.

    Args:
        model: A Sapiens2 backbone or task model.
        path: Output file (``sapiens2_<size>_<task>.safetensors`` by
            convention).
        metadata: Extra string header entries.

    Returns:
        The state dict written.
    """
    state = to_official_layout(model)
    save_safetensors(state, path, metadata)
    return state
