"""The one place where sapiens_mm reads checkpoint files.

Every load is ``torch.load(..., weights_only=True)`` with an explicit
allowlist of the (non-tensor) Python types that real checkpoints contain:
numpy arrays and scalars (mmengine's Runner stores them in ``meta`` and
``message_hub``) and mmengine's ``HistoryBuffer`` (whose pickled statistics
methods need a ``getattr`` restricted to exactly those methods). Anything else is refused
before it can run: a pickle whose ``__reduce__`` calls ``os.system`` is never
executed. A user who trusts a file that needs another type can allow it with
:func:`add_trusted_types` or the ``SAPIENS_MM_TRUSTED_TYPES`` environment
variable (comma-separated ``module.Name`` entries).

``.safetensors`` files (the Sapiens2 release format; tensors only, no
pickle) are read with the ``safetensors`` package, recognised by suffix or
layout.

Importing :mod:`sapiens_mm` registers :func:`load_local` as mmengine's loader
for local paths, so ``Runner`` resume / ``load_from`` and ``Pretrained``
init go through the same safe path.
"""
import importlib
import os
import os.path as osp
import pickle
import re
from collections import OrderedDict
from typing import Any, Dict, Iterable, List, Optional, Union

import numpy as np
import torch
import torch.nn as nn
from mmengine.logging import print_log
from mmengine.runner.checkpoint import CheckpointLoader

from .safetensors_io import is_safetensors_file, load_safetensors
from .sapiens2_layout import from_official_layout

__all__ = [
    'CheckpointTypeError', 'add_trusted_types', 'trusted_types', 'load_file',
    'get_state_dict', 'load_state_dict', 'load_checkpoint',
    'load_backbone_checkpoint', 'register_mmengine_loader'
]

TRUSTED_TYPES_ENV = 'SAPIENS_MM_TRUSTED_TYPES'


class CheckpointTypeError(pickle.UnpicklingError):
    """A checkpoint needs a Python type outside the allowlist."""


def _numpy_types() -> List[Any]:
    try:  # numpy >= 2
        multiarray = importlib.import_module('numpy._core.multiarray')
    except ImportError:
        multiarray = importlib.import_module('numpy.core.multiarray')
    found = [np.ndarray, np.dtype, multiarray._reconstruct, multiarray.scalar]
    dtypes = getattr(np, 'dtypes', None)  # numpy >= 1.25: dtype classes
    if dtypes is not None:
        found += [
            getattr(dtypes, n) for n in dir(dtypes) if n.endswith('DType')
        ]
    return found


def _history_buffer_getattr(obj: Any, name: str) -> Any:
    """Stand-in for ``builtins.getattr`` while unpickling.

    mmengine's ``HistoryBuffer`` pickles its statistics methods as
    ``getattr(HistoryBuffer, 'mean')``. A general ``getattr`` would let a
    crafted file reach any attribute (and from there ``os.system``), so only
    public statistics methods of ``HistoryBuffer`` resolve.
    """
    from mmengine.logging.history_buffer import HistoryBuffer
    # The class-level registry is filled by the first HistoryBuffer() only;
    # in a fresh process (e.g. --resume) it is still empty.
    HistoryBuffer()
    if (obj is HistoryBuffer or isinstance(obj, HistoryBuffer)) and \
            not name.startswith('_') and \
            name in HistoryBuffer._statistics_methods:
        return getattr(obj, name)
    raise CheckpointTypeError(
        f'Refused getattr({type(obj).__name__}, {name!r}) while unpickling: '
        'only HistoryBuffer statistics methods may be looked up by name.')


def _default_types() -> List[Any]:
    from mmengine.logging.history_buffer import HistoryBuffer
    return _numpy_types() + [
        HistoryBuffer, (_history_buffer_getattr, 'builtins.getattr')
    ]


_EXTRA_TYPES: List[Any] = []


def _resolve(name: str) -> Any:
    module, _, attr = name.rpartition('.')
    if not module:
        raise ValueError(f'Trusted type {name!r} must be "module.Name".')
    obj = importlib.import_module(module)
    for part in attr.split('.'):
        obj = getattr(obj, part)
    return obj


def add_trusted_types(types: Iterable[Union[str, Any]]) -> None:
    """Allow more Python types in checkpoints, for files you trust.

    Args:
        types: Objects or ``'module.Name'`` strings, as named by the error
            message of a refused file.
    """
    for t in types:
        obj = _resolve(t) if isinstance(t, str) else t
        if obj not in _EXTRA_TYPES:
            _EXTRA_TYPES.append(obj)


def trusted_types() -> List[Any]:
    """The allowlist in force: defaults, :func:`add_trusted_types` entries
    and the ``SAPIENS_MM_TRUSTED_TYPES`` environment variable."""
    env = [
        _resolve(s.strip())
        for s in os.environ.get(TRUSTED_TYPES_ENV, '').split(',') if s.strip()
    ]
    return _default_types() + _EXTRA_TYPES + env


_GLOBAL_RE = re.compile(r'GLOBAL ([\w\.]+)')
_REFUSED_RE = re.compile(r'Refused getattr\(.*')


def load_file(path: str, map_location: Any = 'cpu') -> Any:
    """Read a checkpoint file safely (``weights_only=True`` + allowlist).

    Args:
        path: Local file path: a ``torch.save`` file, or a ``.safetensors``
            file (read without pickle).
        map_location: As for ``torch.load``. Defaults to ``'cpu'``.

    Returns:
        The unpickled object (usually a dict); for safetensors the flat
        name -> tensor dict.

    Raises:
        FileNotFoundError: The path is not a file.
        CheckpointTypeError: The file needs a type outside the allowlist;
            the message names it and says how to allow it.
        ValueError: A safetensors file that cannot be read.
    """
    path = osp.expanduser(str(path))
    if not osp.isfile(path):
        raise FileNotFoundError(f'Checkpoint file not found: {path}')
    if is_safetensors_file(path):
        return load_safetensors(path, map_location)
    try:
        with torch.serialization.safe_globals(trusted_types()):
            return torch.load(path, map_location=map_location,
                              weights_only=True)
    except pickle.UnpicklingError as e:
        refused = _REFUSED_RE.search(str(e))
        if refused is not None:
            raise CheckpointTypeError(
                f'Refused to load checkpoint {path}: {refused.group(0)}'
            ) from None
        found = _GLOBAL_RE.search(str(e))
        if found is None:
            raise pickle.UnpicklingError(
                f'Cannot read checkpoint {path}: {e}') from None
        name = found.group(1)
        raise CheckpointTypeError(
            f'Refused to load checkpoint {path}: it needs the Python object '
            f'`{name}`, which is not in sapiens_mm\'s checkpoint allowlist '
            '(unpickling unknown objects can run arbitrary code). If you '
            'trust this file, allow it with '
            f'`sapiens_mm.checkpoint.add_trusted_types(["{name}"])` or '
            f'`export {TRUSTED_TYPES_ENV}={name}`, then load again.'
        ) from None


def get_state_dict(checkpoint: Any) -> 'OrderedDict[str, torch.Tensor]':
    """Return the state dict inside a loaded checkpoint.

    Accepts a Runner / official full checkpoint (``state_dict`` + ``meta``
    ...), a ``{'model': ...}`` or ``{'module': ...}`` wrapper, or a plain
    state dict (official ``*_clean.pth``).
    """
    if not isinstance(checkpoint, dict):
        raise TypeError(f'A checkpoint must be a dict, got '
                        f'{type(checkpoint).__name__}.')
    for key in ('state_dict', 'model', 'module'):
        if isinstance(checkpoint.get(key), dict):
            checkpoint = checkpoint[key]
            break
    bad = [k for k, v in checkpoint.items() if not isinstance(v, torch.Tensor)]
    if bad:
        raise TypeError('Not a state dict: entries '
                        f'{bad[:5]} are not tensors.')
    state = OrderedDict(checkpoint)
    if state and all(k.startswith('module.') for k in state):  # DDP
        state = OrderedDict((k[len('module.'):], v) for k, v in state.items())
    return state


def _key_list(keys: List[str], limit: int = 20) -> str:
    more = f', ... ({len(keys)} in all)' if len(keys) > limit else ''
    return ', '.join(keys[:limit]) + more


def load_state_dict(module: nn.Module,
                    state_dict: Dict[str, torch.Tensor],
                    strict: bool = True,
                    source: str = 'state dict') -> None:
    """``module.load_state_dict`` with an error that lists every problem.

    Raises:
        RuntimeError: If any key has the wrong shape (nothing is loaded),
            or, with ``strict``, if any key is missing or unexpected. The
            message lists the missing, unexpected and wrong-shape keys.
    """
    own = module.state_dict()
    mismatched = [
        f'{k}: checkpoint {tuple(v.shape)} vs model {tuple(own[k].shape)}'
        for k, v in state_dict.items()
        if k in own and k != 'pos_embed' and not k.endswith('.pos_embed')
        and v.shape != own[k].shape
    ]
    if mismatched:
        # As seen before the module's load hooks (which may add or rename
        # keys, e.g. a missing RoPE ``periods`` buffer).
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
    else:
        result = module.load_state_dict(state_dict, strict=False)
        missing, unexpected = result.missing_keys, result.unexpected_keys
        if not (missing or unexpected):
            return
    msg = (f'{source} does not fit {type(module).__name__}: '
           f'{len(missing)} missing keys [{_key_list(missing)}], '
           f'{len(unexpected)} unexpected keys [{_key_list(unexpected)}], '
           f'{len(mismatched)} wrong-shape keys [{_key_list(mismatched)}].')
    if mismatched or strict:
        raise RuntimeError(
            msg + ' Check that the checkpoint matches the model arch / task'
            + ('.' if mismatched else ', or pass strict=False.'))
    print_log(msg, logger='current', level=30)


def load_checkpoint(model: nn.Module,
                    path: str,
                    map_location: Any = 'cpu',
                    strict: bool = True,
                    revise_keys: Optional[List[tuple]] = None) -> dict:
    """Load a checkpoint file into a whole model with strict key checks.

    Args:
        model: e.g. a ``TopdownPoseEstimator`` or ``EncoderDecoder``.
        path: Runner checkpoint, official full checkpoint, plain state
            dict, or official Sapiens2 ``.safetensors`` (``decode_head.*``
            keys go to ``head.*`` for mmpose estimators).
        map_location: As for ``torch.load``.
        strict: Raise on missing / unexpected keys. Defaults to True.
        revise_keys: ``[(regex, replacement), ...]`` applied to every key.

    Returns:
        The loaded checkpoint object (with ``meta`` when the file has one).
    """
    checkpoint = load_file(path, map_location)
    state = from_official_layout(get_state_dict(checkpoint), model)
    for pattern, repl in revise_keys or []:
        state = OrderedDict(
            (re.sub(pattern, repl, k), v) for k, v in state.items())
    load_state_dict(model, state, strict=strict, source=path)
    return checkpoint


def load_backbone_checkpoint(backbone: nn.Module,
                             path: str,
                             prefix: Optional[str] = None,
                             strict: bool = True) -> None:
    """Load backbone weights from a backbone-only or a full checkpoint.

    Args:
        backbone: The backbone module.
        path: An official ``*_clean.pth`` or Sapiens2 pretrain
            ``.safetensors`` (flat backbone state dict), an MAE or task
            checkpoint (``.pth`` or ``.safetensors``, keys under
            ``backbone.``) or a Runner checkpoint.
        prefix: Key prefix of the backbone inside the file. ``None`` picks
            ``'backbone.'`` when keys carry it, else no prefix.
        strict: Raise on missing / unexpected keys.
    """
    state = get_state_dict(load_file(path))
    if prefix is None:
        prefix = 'backbone.' if any(
            k.startswith('backbone.') for k in state) else ''
    if prefix:
        state = OrderedDict((k[len(prefix):], v) for k, v in state.items()
                            if k.startswith(prefix))
        if not state:
            raise RuntimeError(f'No key of {path} starts with {prefix!r}.')
    if 'cls_token' in state and getattr(backbone, 'cls_token', 0) is None:
        # Pretraining checkpoints carry a cls token fine-tuning drops.
        state.pop('cls_token')
    load_state_dict(backbone, state, strict=strict, source=path)
    print_log(f'Loaded backbone weights from {path}', logger='current')


def load_local(filename: str, map_location: Any = None) -> Any:
    """mmengine ``CheckpointLoader`` scheme for local files (safe)."""
    return load_file(filename, map_location)


def register_mmengine_loader() -> None:
    """Route mmengine's local-file checkpoint loading through
    :func:`load_file` (Runner ``resume`` / ``load_from``, ``Pretrained``
    init)."""
    CheckpointLoader.register_scheme(prefixes='', force=True)(load_local)
