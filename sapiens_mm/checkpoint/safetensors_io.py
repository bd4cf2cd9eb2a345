"""Reading and writing ``.safetensors`` files (the Sapiens2 release format).

A safetensors file is a JSON header plus raw tensor bytes: reading it runs
no code and involves no pickle, so it needs no allowlist.
"""
import json
import os.path as osp
import struct
from collections import OrderedDict
from typing import Any, Dict, Optional

import torch

__all__ = ['SAFETENSORS_SUFFIX', 'is_safetensors_file', 'load_safetensors',
           'save_safetensors', 'safetensors_shapes']

SAFETENSORS_SUFFIX = '.safetensors'
#: Header size sanity bound (the format allows up to 100 MB).
_MAX_HEADER = 100 * 2**20


def is_safetensors_file(path: str) -> bool:
    """Whether ``path`` is a safetensors file: by its ``.safetensors``
    suffix, or (any name) by its layout, an 8-byte little-endian header
    length followed by a JSON object."""
    path = str(path)
    if path.endswith(SAFETENSORS_SUFFIX):
        return True
    try:
        with open(path, 'rb') as f:
            head = f.read(9)
            size = osp.getsize(path)
    except OSError:
        return False
    if len(head) < 9:
        return False
    n = struct.unpack('<Q', head[:8])[0]
    return head[8:9] == b'{' and 0 < n <= min(_MAX_HEADER, size - 8)


def _device(map_location: Any) -> str:
    if map_location is None or callable(map_location) or isinstance(
            map_location, dict):
        return 'cpu'
    return str(map_location)


def load_safetensors(path: str,
                     map_location: Any = 'cpu'
                     ) -> 'OrderedDict[str, torch.Tensor]':
    """Read every tensor of a safetensors file.

    Args:
        path: Local file.
        map_location: Device (``'cpu'``, ``'cuda:0'``, a ``torch.device``);
            ``None``, a dict or a callable mean ``'cpu'``.

    Returns:
        The tensors (their stored dtypes), in file order (safetensors
        writers sort them).

    Raises:
        FileNotFoundError: No such file.
        ValueError: The file is not a valid safetensors file (truncated,
            bad header); the message names it.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file
    path = osp.expanduser(str(path))
    if not osp.isfile(path):
        raise FileNotFoundError(f'Checkpoint file not found: {path}')
    try:
        tensors = load_file(path, device=_device(map_location))
    except (SafetensorError, OSError, ValueError) as e:
        raise ValueError(f'Cannot read safetensors file {path}: {e}. Is the '
                         'download complete?') from None
    return OrderedDict(tensors)


def safetensors_shapes(path: str) -> Dict[str, tuple]:
    """The shape of every tensor of a safetensors file, from its header
    alone (no tensor is read).

    Raises:
        FileNotFoundError: No such file.
        ValueError: The header is not a valid safetensors header.
    """
    path = osp.expanduser(str(path))
    if not osp.isfile(path):
        raise FileNotFoundError(f'Checkpoint file not found: {path}')
    with open(path, 'rb') as f:
        head = f.read(8)
        n = struct.unpack('<Q', head)[0] if len(head) == 8 else 0
        if not 0 < n <= min(_MAX_HEADER, osp.getsize(path) - 8):
            raise ValueError(f'{path} is not a safetensors file (bad header '
                             'length). Is the download complete?')
        try:
            header = json.loads(f.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f'{path}: unreadable safetensors header ({e}).'
                             ) from None
    return {k: tuple(v['shape']) for k, v in header.items()
            if k != '__metadata__' and isinstance(v, dict) and 'shape' in v}


def save_safetensors(state_dict: Dict[str, torch.Tensor], path: str,
                     metadata: Optional[Dict[str, str]] = None) -> None:
    """Write tensors to a safetensors file (atomically: a temporary file in
    the same folder, then a rename).

    Args:
        state_dict: Name -> tensor. Tensors are copied to CPU, contiguous
            and unshared (the format stores no aliasing).
        path: Output file; its folder is created.
        metadata: String -> string header metadata. ``{'format': 'pt'}``
            is added (what the Hugging Face loaders expect).

    Raises:
        TypeError: A value is not a tensor or a metadata entry not a string.
        OSError: The write failed (full disk...); the message names
            ``path`` and no partial file is left under it.
    """
    from safetensors.torch import save_file

    # imported here: sapiens_mm.engine imports this package (its hooks)
    from sapiens_mm.engine.fileio import atomic_path
    bad = [k for k, v in state_dict.items() if not isinstance(v, torch.Tensor)]
    if bad:
        raise TypeError(f'Only tensors can be saved, not {bad[:5]}.')
    meta = dict(format='pt', **(metadata or {}))
    if not all(isinstance(k, str) and isinstance(v, str)
               for k, v in meta.items()):
        raise TypeError(f'safetensors metadata must map str to str, got '
                        f'{json.dumps(meta, default=repr)[:200]}.')
    tensors = {
        k: v.detach().to('cpu', copy=True).contiguous()
        for k, v in state_dict.items()
    }
    with atomic_path(path) as tmp:
        save_file(tensors, tmp, metadata=meta)
