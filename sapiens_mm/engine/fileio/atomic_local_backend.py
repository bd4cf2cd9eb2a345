"""Crash-safe local file writes for mmengine (checkpoints, dumps).

mmengine's ``LocalBackend.put`` opens the target with ``'wb'`` and writes
into it: a process killed during the write (SIGKILL from a scheduler, a
node failure) leaves a truncated file under the final name.
:class:`AtomicLocalBackend` writes to a temporary file in the same folder,
flushes and ``fsync``\\ s it, then ``os.replace``\\ s it onto the target and
``fsync``\\ s the folder: readers see either the old file or the complete new
one, never a partial one.

Importing :mod:`sapiens_mm` registers it with mmengine under its own name,
:data:`ATOMIC_BACKEND` (no URI prefix): mmengine's ``'local'`` backend, the
one every other write of the process goes through, stays mmengine's. The
project's configs select it for their checkpoints
(``default_hooks.checkpoint.backend_args``), and ``tools/train.py`` for a
config whose ``CheckpointHook`` names no backend
(:func:`use_atomic_checkpoints`).
"""
import contextlib
import errno
import os
import os.path as osp
import re
import secrets
from pathlib import Path
from typing import Iterator, List, Union

from mmengine.config import Config
from mmengine.fileio import LocalBackend, register_backend
from mmengine.fileio.backends import backends as mmengine_backends
from mmengine.logging import print_log

__all__ = [
    'ATOMIC_BACKEND', 'AtomicLocalBackend', 'atomic_path', 'atomic_write',
    'register_atomic_backend', 'use_atomic_checkpoints',
    'remove_stale_temp_files', 'ensure_writable_dir'
]

#: The name :class:`AtomicLocalBackend` is registered under in mmengine's
#: file backends: ``backend_args=dict(backend=ATOMIC_BACKEND)``.
ATOMIC_BACKEND = 'sapiens_atomic_local'

#: ``.<name>.tmp<pid>_<8 hex>``: the temporary files of :func:`atomic_path`
#: (and so of :func:`atomic_write`).
_TMP_RE = re.compile(r'^\.(?P<name>.+)\.tmp(?P<pid>\d+)_[0-9a-f]{8}$')


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


@contextlib.contextmanager
def atomic_path(filepath: Union[str, Path],
                durable: bool = True) -> Iterator[str]:
    """A temporary path to write ``filepath`` through, renamed onto it
    when the ``with`` block ends without an error (and, if ``durable``, the
    rename ``fsync``\\ ed with its folder).

    For writers that take a path (``torch.export.save``, safetensors'
    ``save_file``...). The temporary file is hidden, next to ``filepath``
    (same file system, so the rename is atomic) and named like
    :func:`atomic_write`'s (``.<name>.tmp<pid>_<hex>``), so
    :func:`remove_stale_temp_files` cleans it up after a kill. If the block
    raises, the temporary file is removed and ``filepath`` keeps its
    previous content (or stays absent).

    Example:
        >>> with atomic_path('model.pt2') as tmp:
        ...     torch.export.save(program, tmp)

    Raises:
        OSError: The write or the rename failed (full disk, no
            permission...): the message names ``filepath``, ``errno`` is
            kept.
    """
    filepath = osp.abspath(osp.expanduser(str(filepath)))
    folder = osp.dirname(filepath)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise _write_error(filepath, e) from None
    tmp_path = osp.join(
        folder, f'.{osp.basename(filepath)}.tmp{os.getpid()}_'
        f'{secrets.token_hex(4)}')
    try:
        try:
            yield tmp_path
            os.replace(tmp_path, filepath)
        except BaseException:
            if osp.exists(tmp_path):
                os.remove(tmp_path)
            raise
    except OSError as e:
        raise _write_error(filepath, e) from None
    if durable:
        _fsync_dir(folder)


def atomic_write(data: Union[bytes, str],
                 filepath: Union[str, Path],
                 encoding: str = 'utf-8',
                 mode: int = 0o666,
                 durable: bool = True) -> None:
    """Write ``data`` to ``filepath`` so that it is never seen half-written.

    The data goes to a hidden temporary file next to ``filepath`` (same file
    system, so the rename is atomic), which is flushed, ``fsync``\\ ed and
    renamed onto ``filepath`` with ``os.replace`` (:func:`atomic_path`). If
    the process dies before the rename, ``filepath`` keeps its previous
    content (or stays absent) and only a ``.<name>.tmp*`` file is left
    behind.

    Args:
        data: Bytes, or text encoded with ``encoding``.
        filepath: Target path; missing parent folders are created.
        encoding: Text encoding. Defaults to ``'utf-8'``.
        mode: Permissions of the new file (the umask applies). Defaults to
            ``0o666``, as ``open(..., 'wb')``; ``0o600`` for a file only
            its owner may read.
        durable: ``fsync`` the file and its folder, so that it survives the
            machine going down. False for files whose durability is made
            some other way, or not needed (a sharded run's outputs, made
            durable together once a second, and its progress files):
            still atomic, never half-written after a killed process.

    Raises:
        OSError: The write failed (full disk, no permission...): the message
            names ``filepath``, ``errno`` is kept, and no temporary file is
            left.
    """
    if isinstance(data, str):
        data = data.encode(encoding)
    with atomic_path(filepath, durable) as tmp_path:
        # os.open with mode 0o666 by default (not mkstemp's 0o600): the
        # final file gets the same permissions (umask applied) as one
        # written with open(..., 'wb').
        fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        with os.fdopen(fd, 'wb') as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())


def _write_error(path: str, error: OSError) -> OSError:
    """An ``OSError`` (same errno) whose message names ``path`` and what
    to do."""
    hint = {
        errno.ENOSPC: 'the disk is full; free space or write elsewhere',
        errno.EDQUOT: 'the disk quota is exceeded; free space or write '
        'elsewhere',
        errno.EACCES: 'permission denied; choose a folder you can write to',
        errno.EPERM: 'permission denied; choose a folder you can write to',
        errno.EROFS: 'the file system is read-only; choose another folder',
    }.get(error.errno, error.strerror or str(error))
    err = OSError(error.errno, f'Could not write {path}: {hint}. Nothing '
                  'was written under that name (no partial file).')
    err.filename = path
    return err


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
    """Register :class:`AtomicLocalBackend` in mmengine's file backends as
    :data:`ATOMIC_BACKEND`, with no URI prefix: it is used only where
    ``backend_args`` names it. Called on ``import sapiens_mm``; a name
    already taken is left to its owner (logged)."""
    current = mmengine_backends.get(ATOMIC_BACKEND)
    if current is AtomicLocalBackend:
        return
    if current is not None:
        print_log(f'mmengine file backend {ATOMIC_BACKEND!r} is already '
                  f'registered ({current.__name__}); sapiens_mm leaves it.',
                  logger='current', level=30)
        return
    register_backend(ATOMIC_BACKEND, AtomicLocalBackend)


def use_atomic_checkpoints(cfg: Config) -> bool:
    """Make the ``CheckpointHook`` of ``cfg`` write through
    :class:`AtomicLocalBackend` when it names no backend of its own
    (neither ``backend_args`` nor ``file_client_args``); in place.

    Returns:
        Whether the config was changed.
    """
    hooks = cfg.get('default_hooks') or {}
    hook = hooks.get('checkpoint')
    if not hook or hook.get('backend_args') is not None or \
            hook.get('file_client_args') is not None:
        return False
    hook['backend_args'] = dict(backend=ATOMIC_BACKEND)
    return True


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def remove_stale_temp_files(folder: str) -> List[str]:
    """Delete the temporary files that an interrupted :func:`atomic_write`
    left in ``folder`` (``.<name>.tmp<pid>_<hex>``, e.g. a checkpoint save
    killed by SIGKILL), when the process that wrote them is gone.

    Only files of exactly that pattern directly in ``folder`` are touched;
    each removal is logged.

    Args:
        folder: A work dir. Missing folders are fine.

    Returns:
        The removed paths.
    """
    if not osp.isdir(folder):
        return []
    removed = []
    for name in sorted(os.listdir(folder)):
        m = _TMP_RE.match(name)
        path = osp.join(folder, name)
        if m is None or not osp.isfile(path) or _pid_alive(int(m['pid'])):
            continue
        try:
            os.remove(path)
        except OSError:
            continue
        removed.append(path)
        print_log(f'Removed {path}, left by an interrupted write of '
                  f'{m["name"]} (process {m["pid"]} is gone).',
                  logger='current', level=30)
    return removed


def ensure_writable_dir(folder: str, what: str = 'output folder') -> str:
    """Create ``folder`` if needed and check that files can be written in
    it, before any work is done.

    Args:
        folder: The folder.
        what: How the user named it, for the message (e.g.
            ``'--out-dir'``).

    Returns:
        ``folder``.

    Raises:
        OSError: It cannot be created or written to; the message names it,
            ``what`` and the reason.
    """
    probe = None
    try:
        os.makedirs(folder, exist_ok=True)
        probe = osp.join(folder, f'.write_test{os.getpid()}_'
                         f'{secrets.token_hex(4)}')
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.close(fd)
    except OSError as e:
        err = OSError(
            e.errno, f'Cannot write to the {what} {folder} '
            f'({e.strerror or e}); choose a folder you can write to.')
        err.filename = folder
        raise err from None
    finally:
        if probe is not None and osp.exists(probe):
            os.remove(probe)
    return folder
