"""Crash-safe local file writes for mmengine (checkpoints, dumps).

mmengine's ``LocalBackend.put`` opens the target with ``'wb'`` and writes
into it: a process killed during the write (SIGKILL from a scheduler, a
node failure) leaves a truncated file under the final name.
:class:`AtomicLocalBackend` writes to a temporary file in the same folder,
flushes and ``fsync``\\ s it, then ``os.replace``\\ s it onto the target and
``fsync``\\ s the folder: readers see either the old file or the complete new
one, never a partial one.

Importing :mod:`sapiens_mm` registers it as mmengine's ``'local'`` backend
(the one used for paths without a ``scheme://`` prefix), so the Runner's
``CheckpointHook`` and ``mmengine.dump`` write atomically.
"""
import os
import os.path as osp
import secrets
from pathlib import Path
from typing import Union

from mmengine.fileio import LocalBackend, register_backend

__all__ = ['AtomicLocalBackend', 'atomic_write', 'register_atomic_backend']


def _fsync_dir(folder: str) -> None:
    """Persist a rename in ``folder`` (best effort: not every file system
    lets a directory be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(data: Union[bytes, str],
                 filepath: Union[str, Path],
                 encoding: str = 'utf-8') -> None:
    """Write ``data`` to ``filepath`` so that it is never seen half-written.

    The data goes to a hidden temporary file next to ``filepath`` (same file
    system, so the rename is atomic), which is flushed, ``fsync``\\ ed and
    renamed onto ``filepath`` with ``os.replace``. If the process dies before
    the rename, ``filepath`` keeps its previous content (or stays absent) and
    only a ``.<name>.tmp*`` file is left behind.

    Args:
        data: Bytes, or text encoded with ``encoding``.
        filepath: Target path; missing parent folders are created.
        encoding: Text encoding. Defaults to ``'utf-8'``.
    """
    filepath = osp.abspath(osp.expanduser(str(filepath)))
    folder = osp.dirname(filepath)
    os.makedirs(folder, exist_ok=True)
    if isinstance(data, str):
        data = data.encode(encoding)
    # os.open with mode 0o666 (not mkstemp's 0o600): the final file gets the
    # same permissions (umask applied) as one written with open(..., 'wb').
    tmp_path = osp.join(
        folder, f'.{osp.basename(filepath)}.tmp{os.getpid()}_'
        f'{secrets.token_hex(4)}')
    fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_path, filepath)
    except BaseException:
        if osp.exists(tmp_path):
            os.remove(tmp_path)
        raise
    _fsync_dir(folder)


class AtomicLocalBackend(LocalBackend):
    """mmengine ``LocalBackend`` whose ``put`` / ``put_text`` are atomic
    (temporary file + ``fsync`` + ``os.replace``, see :func:`atomic_write`).

    Reading, listing and removing are inherited unchanged.
    """

    def put(self, obj: bytes, filepath: Union[str, Path]) -> None:
        """Write bytes to ``filepath`` atomically."""
        atomic_write(obj, filepath)

    def put_text(self,
                 obj: str,
                 filepath: Union[str, Path],
                 encoding: str = 'utf-8') -> None:
        """Write text to ``filepath`` atomically."""
        atomic_write(obj, filepath, encoding=encoding)


def register_atomic_backend() -> None:
    """Make :class:`AtomicLocalBackend` mmengine's backend for local paths
    (name ``'local'``, prefix ``''``). Called on ``import sapiens_mm``."""
    register_backend('local', AtomicLocalBackend, force=True, prefixes='')
