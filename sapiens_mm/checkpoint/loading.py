"""The one place where sapiens_mm reads checkpoint files.

Every load is ``torch.load(..., weights_only=True)`` with an explicit
allowlist of the (non-tensor) Python types that real checkpoints contain:
numpy arrays and scalars (mmengine's Runner stores them in ``meta`` and
``message_hub``) and mmengine's ``HistoryBuffer`` (whose pickled statistics
methods need a ``getattr`` restricted to exactly those methods). Anything
else is refused before it can run: a pickle whose ``__reduce__`` calls
``os.system`` is never executed. numpy scalars are built through a guarded
``scalar`` that refuses dtypes holding Python objects (raw bytes would
become object pointers). A user who trusts a file that needs another data
class can allow it with :func:`add_trusted_types` or the
``SAPIENS_MM_TRUSTED_TYPES`` environment variable (comma-separated
``module.Name`` entries); functions and anything from ``os``,
``subprocess``, ``builtins.eval`` and the like are refused even then.
Weights with NaN / inf values are refused by :func:`load_state_dict`.

``.safetensors`` files (the Sapiens2 release format; tensors only, no
pickle) are read with the ``safetensors`` package, recognised by suffix or
layout.

Importing :mod:`sapiens_mm` registers :func:`load_file` (through
:mod:`sapiens_mm.zoo.loader`) as mmengine's loader for local paths, so
``Runner`` resume / ``load_from`` and ``Pretrained`` init go through the
same safe path. This package only turns files into state dicts: it imports
nothing from the model zoo, the inference front end or deployment.
"""
import importlib
import io
import os
import os.path as osp
import pickle
import re
from collections import OrderedDict
from typing import (Any, Dict, Iterable, Iterator, List, Optional, Set,
                    Tuple, Union)

import numpy as np
import torch
import torch.nn as nn
from mmengine.logging import print_log

from .safetensors_io import is_safetensors_file, load_safetensors
from .sapiens2_layout import from_official_layout
from .transformers_layout import (
    is_transformers_folder,
    is_transformers_state_dict,
    load_transformers_checkpoint,
)

__all__ = [
    'CheckpointTypeError', 'TrustedTypeError', 'add_trusted_types',
    'trusted_types', 'load_file', 'get_state_dict', 'load_state_dict',
    'check_finite', 'non_finite_tensors', 'load_checkpoint',
    'load_backbone_checkpoint'
]

TRUSTED_TYPES_ENV = 'SAPIENS_MM_TRUSTED_TYPES'


class CheckpointTypeError(pickle.UnpicklingError):
    """A checkpoint needs a Python type outside the allowlist."""


def _multiarray():
    try:  # numpy >= 2
        return importlib.import_module('numpy._core.multiarray')
    except ImportError:
        return importlib.import_module('numpy.core.multiarray')


def _holds_objects(dtype: np.dtype) -> bool:
    """Whether ``dtype`` has a Python-object part, judged from its fields
    and sub-arrays, not from its ``hasobject`` flag: the flags are part of a
    pickled dtype's state, so a crafted file can clear them while keeping an
    ``'O'`` field."""
    if dtype.kind == 'O' or dtype.hasobject:
        return True
    if dtype.fields:
        return any(_holds_objects(f[0]) for f in dtype.fields.values())
    if dtype.subdtype is not None:
        return _holds_objects(dtype.subdtype[0])
    return False


def _numpy_scalar(dtype: Any, *args: Any) -> Any:
    """Stand-in for ``numpy.core.multiarray.scalar`` while unpickling.

    ``scalar(dtype, raw_bytes)`` copies the bytes into a new scalar. With a
    dtype that holds Python objects (``'O'``, or a void dtype with an object
    field, which a file can build from the allowlisted ``numpy.dtype``, its
    "has objects" flags cleared) the bytes become object *pointers*: reading
    the scalar then crashes the process or worse. Real numpy scalars never
    have such a dtype (object "scalars" pickle as the object itself), so
    they are refused.
    """
    if not isinstance(dtype, np.dtype) or _holds_objects(dtype):
        raise CheckpointTypeError(
            f'Refused numpy scalar of dtype {dtype!r} while unpickling: a '
            'scalar whose dtype holds Python objects would be built from raw '
            'bytes (object pointers). Real checkpoints never contain one; '
            'the file is corrupt or malicious.')
    return _multiarray().scalar(dtype, *args)


def _refuse_numpy_objects(obj: Any, path: str) -> None:
    """Refuse numpy arrays / dtypes with a Python-object part anywhere in a
    loaded checkpoint (an array rebuilt from raw bytes with such a dtype
    holds forged object pointers). Only dtypes are inspected, never the
    elements, so nothing is dereferenced."""
    seen, todo = set(), [obj]
    while todo:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        dtype = None
        if isinstance(item, np.dtype):
            dtype = item
        elif isinstance(item, (np.ndarray, np.generic)):
            dtype = item.dtype
        if dtype is not None and _holds_objects(dtype):
            raise CheckpointTypeError(
                f'Refused to load checkpoint {path}: it holds a numpy '
                f'array / dtype {dtype!r} with Python objects built from raw '
                'bytes (forged object pointers). Real checkpoints never '
                'contain one; the file is corrupt or malicious.')
        if isinstance(item, dict):
            todo.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            todo.extend(item)
        elif not isinstance(item, (torch.Tensor, np.ndarray, np.generic,
                                   str, bytes, int, float, bool, type(None))):
            todo.extend(getattr(item, '__dict__', {}).values())


def _numpy_types() -> List[Any]:
    multiarray = _multiarray()
    found = [np.ndarray, np.dtype, multiarray._reconstruct]
    # numpy pickles scalars as ``<module>.scalar`` with the module it was
    # imported from; both spellings resolve to the guarded stand-in.
    found += [(_numpy_scalar, f'{m}.scalar')
              for m in ('numpy.core.multiarray', 'numpy._core.multiarray')]
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

#: Modules whose objects can run code, touch files or processes, or reach
#: any other object: never allowed in a checkpoint, even when asked.
_DENIED_MODULES = frozenset({
    'os', 'posix', 'nt', 'posixpath', 'ntpath', 'subprocess', 'sys',
    'shutil', 'importlib', 'runpy', 'pickle', '_pickle', 'marshal', 'ctypes',
    'code', 'codeop', 'pty', 'socket', 'multiprocessing', 'webbrowser',
    'operator', 'functools', 'types', 'inspect', 'pdb', 'bdb', 'signal',
    'threading', '_thread', 'asyncio', 'platform', 'timeit', 'pydoc',
    'pkgutil', 'zipimport', 'io', '_io', 'tempfile', 'glob',
    'shelve', 'dill', 'cloudpickle', 'joblib'
})
#: ``builtins`` classes that build code or reach arbitrary attributes.
_DENIED_BUILTINS = frozenset({
    'eval', 'exec', 'compile', 'getattr', 'setattr', 'delattr', '__import__',
    'open', 'globals', 'locals', 'vars', 'input', 'breakpoint', 'help',
    'type', 'object', 'super', 'property', 'classmethod', 'staticmethod',
    'memoryview', 'exit', 'quit', 'print'
})


class TrustedTypeError(ValueError):
    """A requested trusted type is refused (it can run code) or cannot be
    found."""


def _denied_reason(name: str) -> Optional[str]:
    """Why the global ``module.Name`` may never be allowed, or None.

    Decided from the name alone: nothing is imported.
    """
    module, _, attr = name.rpartition('.')
    root = module.split('.')[0]
    if root in _DENIED_MODULES or module == 'torch.hub' or \
            module.startswith('torch.serialization'):
        return (f'`{name}` comes from `{module}`, whose objects can run '
                'code or touch files and processes')
    if root in ('builtins', '__builtin__') and \
            attr.split('.')[0] in _DENIED_BUILTINS:
        return f'`{name}` can run code or reach any attribute'
    if any(part.startswith('__') for part in name.split('.')):
        return f'`{name}` names a dunder attribute'
    return None


def _resolve(name: str) -> Any:
    """The class named ``module.Name`` (imported), if it may be trusted.

    Raises:
        TrustedTypeError: Not ``module.Name``, denied (see
            :func:`_denied_reason`), not found, or not a class.
    """
    name = str(name).strip()
    module, _, attr = name.rpartition('.')
    if not module or not attr:
        raise TrustedTypeError(
            f'Trusted type {name!r} must be written "module.Name".')
    reason = _denied_reason(name)
    if reason is not None:
        raise TrustedTypeError(f'Refused to trust {reason}; it is never '
                               'allowed in a checkpoint.')
    try:
        obj = importlib.import_module(module)
        for part in attr.split('.'):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise TrustedTypeError(f'Trusted type {name!r} not found ({e}).'
                               ) from None
    _check_trustable(obj, name)
    return obj


def _check_trustable(obj: Any, name: str) -> None:
    """Only classes may be trusted (instances get their state set, nothing
    else runs); functions and other callables are refused."""
    if not isinstance(obj, type):
        raise TrustedTypeError(
            f'Refused to trust `{name}`: only classes can be trusted, and it '
            f'is a {type(obj).__name__} (calling arbitrary functions while '
            'unpickling can run code).')
    module = getattr(obj, '__module__', '') or ''
    reason = _denied_reason(f'{module}.{obj.__qualname__}')
    if reason is not None:
        raise TrustedTypeError(f'Refused to trust {reason}.')


def add_trusted_types(types: Iterable[Union[str, Any]]) -> None:
    """Allow more Python classes in checkpoints, for files you trust.

    Only plain data classes can be allowed: functions, and anything from
    ``os``, ``subprocess``, ``sys``, ``builtins.eval`` / ``exec`` /
    ``getattr`` / ``__import__`` and the like (see ``_DENIED_MODULES``,
    ``_DENIED_BUILTINS``) are refused even when asked.

    Args:
        types: Classes or ``'module.Name'`` strings, as named by the error
            message of a refused file.

    Raises:
        TrustedTypeError: An entry is refused or not found.
    """
    for t in types:
        if isinstance(t, str):
            obj = _resolve(t)
        else:
            _check_trustable(
                t, f'{getattr(t, "__module__", "?")}.'
                f'{getattr(t, "__qualname__", repr(t))}')
            obj = t
        if obj not in _EXTRA_TYPES:
            _EXTRA_TYPES.append(obj)


def _env_types() -> List[Any]:
    """The classes named in ``SAPIENS_MM_TRUSTED_TYPES``."""
    found = []
    for entry in os.environ.get(TRUSTED_TYPES_ENV, '').split(','):
        if not entry.strip():
            continue
        try:
            found.append(_resolve(entry))
        except TrustedTypeError as e:
            raise TrustedTypeError(
                f'Environment variable {TRUSTED_TYPES_ENV} has a bad entry '
                f'{entry.strip()!r}: {e} Fix or unset {TRUSTED_TYPES_ENV} '
                '(comma-separated module.ClassName entries).') from None
    return found


def trusted_types() -> List[Any]:
    """The allowlist in force: defaults, :func:`add_trusted_types` entries
    and the ``SAPIENS_MM_TRUSTED_TYPES`` environment variable.

    Raises:
        TrustedTypeError: A bad ``SAPIENS_MM_TRUSTED_TYPES`` entry (the
            message names the variable).
    """
    return _default_types() + _EXTRA_TYPES + _env_types()


_GLOBAL_RE = re.compile(r'GLOBAL ([\w\.]+)')
_REFUSED_RE = re.compile(r'Refused (?:getattr\(|numpy scalar ).*')
#: torch's own explanation after its advice (on the same line, or after a
#: blank line), up to its documentation pointer.
_WO_ERROR_RE = re.compile(r'WeightsUnpickler error:\s*(.*?)\s*(?:Check the '
                          r'documentation of torch\.load|\Z)', re.S)
#: Pickle opcodes that push a string (the module and name STACK_GLOBAL
#: takes from the stack).
_STRING_OPS = frozenset({'SHORT_BINUNICODE', 'BINUNICODE', 'BINUNICODE8',
                         'UNICODE', 'SHORT_BINSTRING', 'BINSTRING',
                         'STRING'})


def _not_a_checkpoint(path: str, detail: str) -> pickle.UnpicklingError:
    return pickle.UnpicklingError(
        f'Cannot read checkpoint {path}: it is not a valid PyTorch '
        f'checkpoint ({detail}). The file is empty, truncated or not written '
        'by torch.save; download or copy it again.')


def _pickles(path: str) -> Iterator[bytes]:
    """The pickle streams of a ``torch.save`` file: ``data.pkl`` of a zip
    file, or the file itself (legacy format, several pickles in a row)."""
    import zipfile
    try:
        with zipfile.ZipFile(path) as z:
            names = [n for n in z.namelist()
                     if n.endswith('data.pkl') and n.count('/') <= 1]
            for name in names[:1]:
                yield z.read(name)
            return
    except (zipfile.BadZipFile, OSError):
        pass
    with open(path, 'rb') as f:
        yield f.read(64 << 20)  # legacy: the pickles come first


def _pickle_scan(path: str) -> Tuple[List[str], Optional[int]]:
    """``(globals, protocol)``: every ``module.name`` the pickles of a
    checkpoint reference (``GLOBAL``, ``INST``, ``STACK_GLOBAL``), in
    order, and the highest pickle protocol they declare. Read with
    :mod:`pickletools`: nothing is unpickled."""
    import pickletools
    names: List[str] = []
    protocol: Optional[int] = None
    for data in _pickles(path):
        stream = io.BytesIO(data)
        while stream.tell() < len(data):
            recent: List[Any] = []  # what each opcode pushed (strings)
            memo: Dict[int, Any] = {}
            try:
                for op, arg, _ in pickletools.genops(stream):
                    if op.name == 'PROTO':
                        protocol = max(protocol or 0, int(arg))
                    elif op.name in ('GLOBAL', 'INST'):
                        names.append(str(arg).replace(' ', '.'))
                    elif op.name == 'STACK_GLOBAL' and len(recent) >= 2 \
                            and all(isinstance(v, str) for v in recent[-2:]):
                        names.append(f'{recent[-2]}.{recent[-1]}')
                    if op.name in _STRING_OPS:
                        recent.append(arg if isinstance(arg, str) else
                                      bytes(arg).decode('latin-1'))
                    elif op.name == 'MEMOIZE' and recent:
                        memo[len(memo)] = recent[-1]
                    elif op.name in ('PUT', 'BINPUT', 'LONG_BINPUT') and \
                            recent:
                        memo[int(arg)] = recent[-1]
                    elif op.name in ('GET', 'BINGET', 'LONG_BINGET'):
                        recent.append(memo.get(int(arg)))
                    elif op.name not in ('FRAME', 'PROTO', 'STOP'):
                        recent.append(None)
            except (ValueError, EOFError):  # not (or no more) pickle
                break
    return names, protocol


#: Globals of torch's own default allowlist outside the ``torch`` package
#: (torch 2.14: containers, numbers and the byte codec of protocol-2
#: pickles).
_TORCH_DEFAULT_GLOBALS = frozenset({
    'collections.OrderedDict', 'collections.Counter', '_codecs.encode',
    'builtins.set', 'builtins.bytearray', 'builtins.complex'})


def _allowed_global_names(allowed: List[Any]) -> Set[str]:
    """``module.name`` of the globals of the allowlist ``allowed``."""
    names = set()
    for entry in allowed:
        if isinstance(entry, tuple):
            names.add(entry[1])
        else:
            names.add(f'{entry.__module__}.{entry.__qualname__}')
    return names


def _torch_default_global(name: str) -> bool:
    """Whether ``name`` is of the kind torch's safe loader allows by itself:
    its own tensor / storage / dtype rebuilders and the containers and codec
    of :data:`_TORCH_DEFAULT_GLOBALS` (used to name the global that made a
    load fail, after torch refused it)."""
    return name.startswith('torch.') or name in _TORCH_DEFAULT_GLOBALS


def _imported_object(name: str) -> Any:
    """The object ``module.Name`` names if its module is imported already
    (looked up statically: nothing is imported or run), else None."""
    import inspect
    import sys
    module, _, attr = name.rpartition('.')
    obj = sys.modules.get(module)
    for part in attr.split('.') if obj is not None else []:
        obj = inspect.getattr_static(obj, part, None)
        if obj is None:
            break
    return obj


def _needs_global(path: str, name: str) -> CheckpointTypeError:
    if '.' not in name:  # torch names builtins bare ("GLOBAL eval")
        name = f'builtins.{name}'
    msg = (f'Refused to load checkpoint {path}: it needs the Python object '
           f'`{name}`, which is not in sapiens_mm\'s checkpoint allowlist '
           '(unpickling unknown objects can run arbitrary code).')
    reason = _denied_reason(name)
    if reason is None:
        obj = _imported_object(name)
        if obj is not None and not isinstance(obj, type):
            reason = (f'`{name}` is a {type(obj).__name__}, not a data '
                      'class, and calling it while unpickling can run code')
    if reason is not None:
        return CheckpointTypeError(
            f'{msg} {reason[0].upper()}{reason[1:]}: no real checkpoint needs '
            'it and it cannot be allowed. Do not use this file; it is '
            'probably malicious.')
    return CheckpointTypeError(
        f'{msg} If you trust this file and `{name}` is a plain data class, '
        'allow it with '
        f'`sapiens_mm.checkpoint.add_trusted_types(["{name}"])` or '
        f'`export {TRUSTED_TYPES_ENV}={name}`, then load again.')


def _unpickling_refusal(path: str, error: str,
                        allowed: List[Any]) -> pickle.UnpicklingError:
    """The one-line error for a checkpoint ``torch.load(weights_only=True)``
    refused with ``error``: the global it needs (named by torch, or found
    by scanning the pickle when torch stopped at an opcode it does not
    read), else why it is not a checkpoint it can read."""
    refused = _REFUSED_RE.search(error)
    if refused is not None:
        return CheckpointTypeError(
            f'Refused to load checkpoint {path}: {refused.group(0)}')
    found = _GLOBAL_RE.search(error)
    if found is not None:
        return _needs_global(path, found.group(1))
    names, protocol = _pickle_scan(path)
    known = _allowed_global_names(allowed)
    unknown = [n for n in names
               if n not in known and not _torch_default_global(n)]
    if unknown:
        return _needs_global(path, unknown[0])
    detail = _WO_ERROR_RE.search(error)
    detail = ' '.join(detail.group(1).split()) if detail else ''
    if protocol is not None and protocol >= 4 and \
            detail.startswith('Unsupported operand'):
        return pickle.UnpicklingError(
            f'Cannot read checkpoint {path}: it was pickled with protocol '
            f'{protocol}, which torch\'s safe loader (weights_only=True) '
            'does not read. If you trust the file, load it where it was '
            'written and save it again with torch.save\'s default protocol.')
    return _not_a_checkpoint(path, detail or error.splitlines()[0]
                             if error else 'no details')


def load_file(path: str, map_location: Any = 'cpu',
              mmap: bool = False) -> Any:
    """Read a checkpoint file safely (``weights_only=True`` + allowlist).

    Args:
        path: Local file path: a ``torch.save`` file, or a ``.safetensors``
            file (read without pickle); or a Hugging Face Transformers
            Sapiens2 checkpoint (a folder with ``config.json`` and
            ``model.safetensors``, or that file alone), converted to the
            official layout (see :mod:`.transformers_layout`).
        map_location: As for ``torch.load``. Defaults to ``'cpu'``.
        mmap: Map the tensors of a ``torch.save`` zip file instead of
            reading them (``torch.load(mmap=True)``): reading a large
            checkpoint's ``meta`` or ``message_hub`` then costs little.

    Returns:
        The unpickled object (usually a dict); for safetensors the flat
        name -> tensor dict.

    Raises:
        FileNotFoundError: The path is not a file.
        CheckpointTypeError: The file needs a type outside the allowlist
            (referenced by any pickle opcode); the message names it and,
            when it is a type that may be allowed at all, says how.
        pickle.UnpicklingError: The file is empty, truncated, not a
            checkpoint, or pickled with opcodes torch's safe loader does
            not read (pickle protocol 4 and later).
        TrustedTypeError: A bad ``SAPIENS_MM_TRUSTED_TYPES`` entry.
        ValueError: A safetensors file that cannot be read.
    """
    path = osp.expanduser(str(path))
    if is_transformers_folder(path):
        return load_transformers_checkpoint(path, map_location)
    if not osp.isfile(path):
        raise FileNotFoundError(f'Checkpoint file not found: {path}')
    if is_safetensors_file(path):
        state = load_safetensors(path, map_location)
        if is_transformers_state_dict(state):
            return load_transformers_checkpoint(path, map_location, state)
        return state
    if osp.getsize(path) == 0:
        raise _not_a_checkpoint(path, 'the file is empty')
    allowed = trusted_types()
    try:
        with torch.serialization.safe_globals(allowed):
            loaded = torch.load(path, map_location=map_location,
                                weights_only=True, mmap=mmap)
    except pickle.UnpicklingError as e:
        raise _unpickling_refusal(path, str(e), allowed) from None
    except (EOFError, RuntimeError, ValueError) as e:
        # torch's zip reader: "PytorchStreamReader failed ...", EOF of a
        # truncated legacy file, ...
        first = str(e).splitlines()[0] if str(e) else 'no details'
        raise _not_a_checkpoint(path, f'{type(e).__name__}: {first}') from None
    _refuse_numpy_objects(loaded, path)
    return loaded


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


def non_finite_tensors(state_dict: Dict[str, torch.Tensor]) -> List[str]:
    """Names of the floating-point tensors with a NaN or infinite value."""
    return [
        k for k, v in state_dict.items()
        if isinstance(v, torch.Tensor) and (v.is_floating_point()
                                            or v.is_complex())
        and not bool(torch.isfinite(v).all())
    ]


def check_finite(state_dict: Dict[str, torch.Tensor],
                 source: str = 'state dict') -> None:
    """Refuse weights with NaN / inf values (a corrupt or diverged file:
    the model would output NaN everywhere).

    Raises:
        ValueError: Naming the tensors (at most 10) and how many there are.
    """
    bad = non_finite_tensors(state_dict)
    if bad:
        counts = ', '.join(
            f'{k} ({int((~torch.isfinite(state_dict[k])).sum())} of '
            f'{state_dict[k].numel()})' for k in bad[:10])
        raise ValueError(
            f'{source} has NaN / infinite values in {len(bad)} tensor(s): '
            f'{counts}{", ..." if len(bad) > 10 else ""}. The file is '
            'corrupt (or was saved from a diverged run); use another '
            'checkpoint.')


def _key_list(keys: List[str], limit: int = 20) -> str:
    more = f', ... ({len(keys)} in all)' if len(keys) > limit else ''
    return ', '.join(keys[:limit]) + more


def load_state_dict(module: nn.Module,
                    state_dict: Dict[str, torch.Tensor],
                    strict: bool = True,
                    source: str = 'state dict') -> None:
    """``module.load_state_dict`` with an error that lists every problem.

    Non-finite weights are always refused (:func:`check_finite`), with
    ``strict`` or not.

    A ``module`` on the ``meta`` device (built under
    ``torch.device('meta')``: no memory) checks keys and shapes only: the
    tensors are assigned to it, not copied, and their values are not
    checked.

    Raises:
        RuntimeError: If any key has the wrong shape (nothing is loaded),
            or, with ``strict``, if any key is missing or unexpected. The
            message lists the missing, unexpected and wrong-shape keys.
        ValueError: A tensor has NaN / inf values (nothing is loaded).
    """
    skeleton = any(t.is_meta for t in module.parameters())
    if not skeleton:
        check_finite(state_dict, source)
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
        result = module.load_state_dict(state_dict, strict=False,
                                        assign=skeleton)
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
    checkpoint, state = read_checkpoint(path, model, map_location,
                                        revise_keys)
    load_state_dict(model, state, strict=strict, source=path)
    return checkpoint


def read_checkpoint(
    path: str,
    model: nn.Module,
    map_location: Any = 'cpu',
    revise_keys: Optional[List[tuple]] = None
) -> Tuple[Any, 'OrderedDict[str, torch.Tensor]']:
    """Read a checkpoint file and its state dict in ``model``'s key layout,
    without loading it (see :func:`load_checkpoint`).

    ``model`` only decides the key layout (official Sapiens2 names), so a
    skeleton built on the ``meta`` device serves: with
    :func:`load_state_dict` it checks the keys and shapes before the real
    model is allocated.

    Returns:
        ``(checkpoint object, state dict)``.
    """
    checkpoint = load_file(path, map_location)
    state = from_official_layout(get_state_dict(checkpoint), model)
    for pattern, repl in revise_keys or []:
        state = OrderedDict(
            (re.sub(pattern, repl, k), v) for k, v in state.items())
    return checkpoint, state


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
