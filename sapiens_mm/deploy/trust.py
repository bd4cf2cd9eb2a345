"""Which ``.pt2`` archives this installation loads: the ones it wrote.

A torch.export archive is a program, not data. ``torch.export.load`` hands
the symbolic-size expressions of its graph (``expr_str`` in
``models/model.json``) to sympy, which evaluates them as Python, and running
the graph calls whatever ATen operators it names (``aten.from_file`` with
``shared=True`` followed by in-place writes overwrites any file the user can
write). Checking the weights and metadata of such a file cannot make it
safe, so sapiens_mm runs only ``.pt2`` files it exported itself:

* :func:`~sapiens_mm.deploy.export_model` records the SHA-256 of every
  ``.pt2`` it writes in a per-user trust store (:func:`trust_store_path`,
  a JSON file created ``0600`` in a ``0700`` folder, replaced atomically
  under a lock).
* :func:`open_trusted_pt2` (used by
  :class:`~sapiens_mm.deploy.ExportedModel`) opens a ``.pt2``, hashes the
  open file and refuses it, before torch reads anything, unless its digest
  is in the store; torch then reads the same open file, so the file that
  was checked is the file that is loaded.
* A user who vouches for a ``.pt2`` from elsewhere records it with
  :func:`trust_exported_program` (``python -m sapiens_mm --trust-pt2``).
  That runs the file's code with the user's rights. A file the archive
  checks refuse is never recorded.

Models are exchanged as ONNX (a data format that onnxruntime interprets,
with no Python evaluation and no file operators) or re-exported from the
checkpoint on the machine that runs them.

The store is a plain allowlist, not a keyed signature: whoever can write it
(the user) can also change the user's shell start-up files, so a key would
protect nothing more. The store is not used when it or its folder is
writable by other users or owned by someone else.
"""
import contextlib
import datetime
import hashlib
import json
import os
import os.path as osp
import stat
from typing import BinaryIO, Dict, Iterator, Union

from mmengine.logging import print_log

from sapiens_mm.engine.fileio import atomic_write

from .metadata import read_metadata
from .safe_load import UnsafeModelError, check_pt2_archive

__all__ = [
    'TRUST_STORE_ENV', 'UntrustedModelError', 'trust_store_path',
    'file_sha256', 'trusted_digests', 'trust_exported_program',
    'open_trusted_pt2'
]

#: Environment variable naming the trust store file (overrides the default
#: ``$XDG_CONFIG_HOME/sapiens_mm/trusted_pt2.json``).
TRUST_STORE_ENV = 'SAPIENS_MM_TRUST_STORE'
_FORMAT = 'sapiens_mm.trusted_pt2'


class UntrustedModelError(UnsafeModelError):
    """A ``.pt2`` archive this installation did not write and the user did
    not vouch for."""


def trust_store_path() -> str:
    """The trust store file: ``$SAPIENS_MM_TRUST_STORE``, else
    ``$XDG_CONFIG_HOME/sapiens_mm/trusted_pt2.json`` (``~/.config`` when
    ``XDG_CONFIG_HOME`` is unset; ``%APPDATA%`` on Windows)."""
    path = os.environ.get(TRUST_STORE_ENV)
    if path:
        return osp.abspath(osp.expanduser(path))
    base = os.environ.get('XDG_CONFIG_HOME') or (
        os.environ.get('APPDATA') if os.name == 'nt' else None) or \
        osp.join(osp.expanduser('~'), '.config')
    return osp.join(base, 'sapiens_mm', 'trusted_pt2.json')


def file_sha256(f: BinaryIO) -> str:
    """Hex SHA-256 of an open binary file from its start; the file is left
    at its start again."""
    f.seek(0)
    digest = hashlib.file_digest(f, 'sha256').hexdigest()
    f.seek(0)
    return digest


def _check_private(path: str, what: str) -> None:
    """Refuse a store (file or folder) other users could have written."""
    if os.name != 'posix':
        return
    st = os.stat(path)
    if st.st_uid != os.getuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UntrustedModelError(
            f'The .pt2 trust store {what} {path} is writable by other users '
            'or not owned by you, so its list of trusted files cannot be '
            f'relied on; fix it with `chmod go-w {path}` (and chown it to '
            'yourself) or point $SAPIENS_MM_TRUST_STORE elsewhere.')


def _read_store(path: str) -> Dict[str, dict]:
    if not osp.exists(path):
        return {}
    _check_private(osp.dirname(path), 'folder')
    _check_private(path, 'file')
    try:
        with open(path, encoding='utf-8') as f:
            data = json.load(f)
        files = data['files'] if data.get('format') == _FORMAT else None
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        files = None
    if not isinstance(files, dict):
        raise UntrustedModelError(
            f'The .pt2 trust store {path} is not a trust store written by '
            'sapiens_mm (unreadable or altered); delete it and re-export '
            'your .pt2 models (their digests are recorded again).')
    return files


def trusted_digests() -> Dict[str, dict]:
    """``{sha256: {"path", "source", "time"}}`` of the trusted ``.pt2`` files
    (empty when there is no store yet).

    Raises:
        UntrustedModelError: The store is unreadable, altered, or writable
            by other users.
    """
    return _read_store(trust_store_path())


def trust_exported_program(path: Union[str, os.PathLike],
                           source: str = 'vouched') -> str:
    """Record ``path``'s current content as trusted to load.

    Called by :func:`~sapiens_mm.deploy.export_model` for every ``.pt2`` it
    writes (``source='exported'``). Call it yourself only for a ``.pt2`` you
    vouch for: loading it runs its code with your rights (see the module
    docstring and docs/security.md).

    Only a file that passes the checks loading applies is recorded: its
    export metadata (:func:`~sapiens_mm.deploy.read_metadata`) and the
    archive check (:func:`~sapiens_mm.deploy.safe_load.check_pt2_archive`),
    run on the bytes that are hashed. A file that loading would refuse
    leaves the store as it was.

    Args:
        path: A ``.pt2`` file. Its bytes are hashed now; a later change of
            the file makes it untrusted again.
        source: Why it is trusted, stored for the record (``'exported'`` or
            ``'vouched'``).

    Returns:
        The recorded SHA-256 (hex).

    Raises:
        OSError: The file cannot be read, or the store cannot be written
            (the message names it).
        ValueError: Not an exported Sapiens model (no export metadata).
        UnsafeModelError: The archive is refused (see
            :func:`~sapiens_mm.deploy.safe_load.check_pt2_archive`);
            nothing is recorded.
        UntrustedModelError: The existing store is unusable (see
            :func:`trusted_digests`).
    """
    path = osp.abspath(str(path))
    read_metadata(path)
    with open(path, 'rb') as f:
        digest = file_sha256(f)
        check_pt2_archive(path, f)  # the bytes that were hashed
    store = trust_store_path()
    folder = osp.dirname(store)
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        with _locked(folder):
            files = _read_store(store)
            files[digest] = dict(
                path=path,
                source=str(source),
                time=datetime.datetime.now(
                    datetime.timezone.utc).isoformat(timespec='seconds'))
            text = json.dumps(dict(format=_FORMAT, version=1, files=files),
                              indent=1)
            atomic_write(text, store, mode=0o600)
    except OSError as e:
        raise OSError(e.errno, f'Could not record {path} in the .pt2 trust '
                      f'store {store}: {e.strerror or e}') from None
    print_log(f'Trusted {path} (sha256 {digest[:12]}..., {source}) in '
              f'{store}.', logger='current')
    return digest


@contextlib.contextmanager
def _locked(folder: str) -> Iterator[None]:
    """Serialise read-modify-write of the store between processes (POSIX
    ``flock``; elsewhere unlocked)."""
    try:
        import fcntl
    except ImportError:  # Windows
        yield
        return
    fd = os.open(osp.join(folder, '.trusted_pt2.lock'),
                 os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _refusal(path: str, store: str) -> UntrustedModelError:
    return UntrustedModelError(
        f'Refused {path}: this .pt2 was not exported by this installation '
        f'(its SHA-256 is not in the trust store {store}), and a .pt2 graph '
        'is a program: loading and running it can execute code and write '
        'files. Re-export it here from its checkpoint '
        '(tools/deploy/export.py), use the .onnx export instead, or, if you '
        'vouch for this file, trust it with --trust-pt2 '
        '(sapiens_mm.deploy.trust_exported_program).')


@contextlib.contextmanager
def open_trusted_pt2(path: Union[str, os.PathLike]) -> Iterator[BinaryIO]:
    """Open a ``.pt2`` for reading, refusing it unless its content is in the
    trust store.

    Read the archive only through the yielded file (at its start): it is
    the content that was hashed, even if the path is replaced meanwhile.

    Raises:
        FileNotFoundError: No such file.
        UntrustedModelError: The file is not trusted (one line: why, and
            what to do), or the store is unusable.
    """
    path = str(path)
    with open(path, 'rb') as f:
        if file_sha256(f) not in trusted_digests():
            raise _refusal(path, trust_store_path())
        yield f
