"""Model files from the Hugging Face Hub, into the Hugging Face cache.

:func:`fetch` turns a registry card (see :mod:`sapiens_mm.zoo.cards`) into a
local file; :func:`resolve_checkpoint` turns whatever a user names as a
checkpoint (a path, a registry name or alias, a repository id, an
``hf://`` URL) into a local path.

The Hugging Face environment variables are honoured when each call is made:
``HF_HOME`` / ``HF_HUB_CACHE`` (where files are cached, shared with every
other Hugging Face tool), ``HF_ENDPOINT`` (a mirror), ``HF_TOKEN`` (gated
repositories), ``HF_HUB_OFFLINE`` (use the cache only),
``HF_HUB_DISABLE_XET`` (never use ``hf_xet``).

- One download per file per machine: a file already in the cache for the
  card's revision is used without contacting the Hub (``check_remote=True``,
  as ``tools/download.py`` does, asks the Hub for the current listing).
- The file is chosen from the repository's listing: the card's file name, or
  else the file matching its ``File Pattern`` (names drift between a
  repository's variants).
- What a server sends is untrusted (``HF_ENDPOINT`` may name any mirror).
  The commit id and the ETag, which name paths in the cache, must be 40
  hexadecimal digits (a commit) and 40 or 64 (the Hub's hash of the file);
  a file name in a listing must be a relative path without ``..``;
  anything else is refused (:class:`HubAnswerError`) before a path is
  touched. The file is then requested at that commit and streamed into a
  temporary file of this process in the repository's ``blobs/`` folder,
  never past the size the server announced; it enters the cache only when
  its size and hash match its ETag and the listing: renamed to
  ``blobs/<etag>`` and linked as ``snapshots/<commit>/<path>``
  (``refs/<revision>`` recorded), the layout every Hugging Face tool reads.
  A failed download leaves nothing behind, and nothing already in the cache
  is deleted, so jobs that share one cache on a file system without working
  locks each check their own copy and swap it in atomically (a lock file
  beside the blob avoids duplicate downloads where locks work). Nothing
  is written outside the repository's folder of the cache. A corrupt
  download is tried once more (over HTTP), then refused.
- A file the server names as Xet-backed (``X-Xet-Hash``) is fetched with
  ``hf_xet`` when it is installed, in a child process
  (:mod:`sapiens_mm.zoo.xet_child`) that is killed when it passes the
  file's time limit or writes more than the announced size; the CAS
  address and access token come from the endpoint's own token route for
  the checked commit and are checked (an ``https`` URL, ``http`` only for
  an ``http`` endpoint; never ``hf_xet``'s local scheme). The child writes
  into a new folder of this process beside the blob, ``hf_xet``'s own
  files (``HF_XET_CACHE``) included, and the file enters the cache only
  after the same size and hash checks. A Xet route that cannot be used (a
  malformed Xet answer, no token, ``hf_xet`` failing or missing in the
  child) falls back to HTTP with a logged line; a limit passed ends the
  download with its one-line error, without a retry.
- Limits (:class:`HubLimits`; ``SAPIENS_MM_HUB_TIMEOUT``,
  ``SAPIENS_MM_HUB_MIN_SPEED``): a metadata, listing or Xet token request
  ends within ``timeout`` seconds, headers and body together; a file of S
  bytes within ``timeout + S / min_speed``, over HTTP or through
  ``hf_xet``; a listing is at most 64 MiB.
- A connection that drops is resumed at once with an HTTP range request
  (given up after three attempts in a row without a new byte); a download
  whose process was killed starts again in the next run, which removes the
  leftover.
- The licence of a model is logged when it is first downloaded; the
  transfer shows ``huggingface_hub``'s progress bar (a Xet child reports
  its progress to it).
- Every failure is one line that says what to do: a gated repository, an
  unknown name (with the closest names), a file missing from the repository,
  offline without the file in the cache, a corrupt download, a server
  answer that is refused, a time limit.

``huggingface_hub``'s ``hf_hub_download`` is not used for the transfer: it
names the blob after the ETag of its own metadata request without checking
it and has no overall time or size limit, over HTTP or in ``hf_xet`` (see
docs/design.md).
"""
import collections
import contextlib
import fnmatch
import hashlib
import importlib.util
import json
import logging
import math
import os
import os.path as osp
import queue
import re
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple, TypeVar
from urllib.parse import quote, urlsplit

from mmengine.logging import print_log

from sapiens_mm.checkpoint import is_transformers_folder
from sapiens_mm.utils.commands import python_command
from sapiens_mm.utils.env_numbers import env_positive_number
from sapiens_mm.utils.media_names import looks_like_model_path

from .cards import ModelCard, lookup_card, unknown_model_error

__all__ = [
    'HubError', 'GatedModelError', 'ModelFileMissingError',
    'NotCachedError', 'CorruptDownloadError', 'HubAnswerError',
    'HubTimeoutError', 'HubLimits', 'HubFile', 'TIMEOUT_ENV',
    'MIN_SPEED_ENV', 'LISTING_MAX_BYTES', 'fetch', 'fetch_url',
    'parse_hf_url', 'resolve_checkpoint', 'cached_file', 'hub_cache_dir',
    'is_offline', 'sha256_of'
]

#: The files of a Transformers checkpoint (read by
#: :func:`sapiens_mm.checkpoint.load_file` as a folder).
TRANSFORMERS_FILES = ('config.json', 'model.safetensors')
#: Seconds: the overall limit of a metadata or listing request and the
#: fixed part of a file transfer's limit (see :class:`HubLimits`).
TIMEOUT_ENV = 'SAPIENS_MM_HUB_TIMEOUT'
#: Bytes per second: the slowest transfer accepted (see :class:`HubLimits`).
MIN_SPEED_ENV = 'SAPIENS_MM_HUB_MIN_SPEED'
#: The longest repository listing (JSON) accepted from a server.
LISTING_MAX_BYTES = 64 << 20
DEFAULT_ENDPOINT = 'https://huggingface.co'

_COMMIT = re.compile(r'[0-9a-f]{40}')
#: The Hub's ETag of a file: its git blob SHA-1, or the SHA-256 of an
#: LFS / Xet file.
_ETAG = re.compile(r'[0-9a-f]{40}|[0-9a-f]{64}')
_SHA256 = re.compile(r'[0-9a-f]{64}')
#: One component of a path in a repository, or of a revision name.
_PART = re.compile(r'[^/\\\x00-\x1f\x7f]+')
#: How much of an error answer is read (its message).
_ERROR_BODY_MAX = 64 << 10
#: Attempts in a row without a new byte before a transfer gives up.
_STALLS = 3
#: Seconds without a write after which another host's temporary download
#: file is a leftover.
_STALE_AFTER = 3600
#: A Xet hash (``X-Xet-Hash``), as ``huggingface_hub`` accepts it.
_XET_HASH = re.compile(r'[0-9a-fA-F]{64}')
#: Visible ASCII without spaces: a Xet access token or CAS address (they
#: go into HTTP requests).
_VISIBLE = re.compile(r'[\x21-\x7e]{1,16384}')
#: What ``hf_xet`` may write beside the file it fetches (its logs).
_XET_BESIDE_MAX = 64 << 20
#: Seconds between the parent's looks at a Xet transfer.
_XET_POLL = 0.05
#: Seconds a Xet child process lives past its transfer's limit before it
#: ends itself (its parent kills it at the limit).
_XET_GRACE = 10.0
#: Runs a file as a script without its folder or the working folder
#: (``''``) on ``sys.path`` (``-P`` does this from Python 3.11 on).
_SCRIPT = ('import runpy, sys; sys.path[:] = [p for p in sys.path if p]; '
           'runpy.run_path(sys.argv[1], run_name="__main__")')


class HubError(RuntimeError):
    """A model file could not be fetched from the Hub (one-line message)."""


class GatedModelError(HubError):
    """The repository is gated and the token (if any) has no access."""


class ModelFileMissingError(HubError):
    """The repository has no file matching the model's file pattern."""


class NotCachedError(HubError):
    """Offline, and the file is not in the cache."""


class CorruptDownloadError(HubError):
    """A downloaded file has the wrong size or hash."""


class HubAnswerError(HubError):
    """The server's answer is not a Hugging Face Hub's (a malformed commit
    id, ETag, size or file name; more bytes than it announced): refused
    before anything of it enters the cache."""


class HubTimeoutError(HubError):
    """A Hub request did not finish within its time limit."""


@dataclass(frozen=True)
class HubLimits:
    """Time limits of Hub requests.

    Attributes:
        timeout: Seconds. A metadata or listing request (connection,
            headers and body together) ends within it; it is also the
            longest silence in a file transfer and the fixed part of its
            limit. ``SAPIENS_MM_HUB_TIMEOUT``, default 60.
        min_speed: Bytes per second. A file of S bytes must arrive within
            ``timeout + S / min_speed`` seconds.
            ``SAPIENS_MM_HUB_MIN_SPEED``, default 262144 (256 KiB/s: a 2 GB
            file may take 2.2 hours).
    """
    timeout: float = 60.0
    min_speed: float = 256 * 1024

    def __post_init__(self):
        for name in ('timeout', 'min_speed'):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value)
                    and value > 0):
                raise ValueError(f'HubLimits.{name} must be a positive '
                                 f'number, not {value!r}.')

    @classmethod
    def from_env(cls) -> 'HubLimits':
        """The limits set by ``SAPIENS_MM_HUB_TIMEOUT`` and
        ``SAPIENS_MM_HUB_MIN_SPEED`` now (defaults where unset).

        Raises:
            ValueError: A variable is not a positive number (named).
        """
        return cls(env_positive_number(TIMEOUT_ENV, cls.timeout),
                   env_positive_number(MIN_SPEED_ENV, cls.min_speed))

    def transfer_seconds(self, size: int) -> float:
        """The time limit of a file transfer of ``size`` bytes."""
        return self.timeout + size / self.min_speed


def _env_flag(*names: str) -> bool:
    """Whether the first of the variables ``names`` that is set (read now)
    says yes, as ``huggingface_hub`` reads its flags."""
    value = next((os.environ[n] for n in names if n in os.environ), '')
    return value.strip().upper() in ('1', 'ON', 'YES', 'TRUE')


def is_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` (read now) forbids network access."""
    return _env_flag('HF_HUB_OFFLINE', 'TRANSFORMERS_OFFLINE')


def hub_cache_dir() -> str:
    """The Hugging Face cache folder, from ``HF_HUB_CACHE`` or ``HF_HOME``
    as they are set now (default ``~/.cache/huggingface/hub``)."""
    if os.environ.get('HF_HUB_CACHE'):
        return osp.expanduser(os.environ['HF_HUB_CACHE'])
    home = os.environ.get('HF_HOME') or osp.join(
        os.environ.get('XDG_CACHE_HOME', osp.join('~', '.cache')),
        'huggingface')
    return osp.join(osp.expanduser(home), 'hub')


def _endpoint() -> str:
    value = os.environ.get('HF_ENDPOINT')
    return value.rstrip('/') if value else DEFAULT_ENDPOINT


def sha256_of(path: str, chunk: int = 1 << 22) -> str:
    """Hex SHA-256 of a file."""
    digest = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(chunk), b''):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class HubFile:
    """A file of a Hub repository as the listing describes it.

    Attributes:
        repo_id: The repository.
        revision: Revision asked for.
        filename: Path in the repository.
        size: Size in bytes, when known.
        sha256: SHA-256 when known (LFS files).
    """
    repo_id: str
    revision: str
    filename: str
    size: Optional[int] = None
    sha256: Optional[str] = None


@dataclass
class _Target:
    """What is being fetched, for messages."""
    repo_id: str
    filename: str = ''
    card: Optional[ModelCard] = None

    @property
    def what(self) -> str:
        where = f'{self.repo_id}/{self.filename}' if self.filename else \
            self.repo_id
        return f'{self.card.name} ({where})' if self.card is not None \
            else where

    def error(self, error: Exception) -> HubError:
        """One-line error for a ``huggingface_hub`` or network failure."""
        from huggingface_hub import errors
        if isinstance(error, HubError):
            return error
        what, repo_id = self.what, self.repo_id
        page = self.card.page if self.card is not None else \
            f'{_endpoint()}/{repo_id}'
        if isinstance(error, errors.GatedRepoError):
            return GatedModelError(
                f'{what}: the repository {repo_id} is gated. Accept its '
                f'licence on {page} (logged in), then set HF_TOKEN to an '
                'access token of that account '
                '(https://huggingface.co/settings/tokens).')
        if isinstance(error, errors.RevisionNotFoundError):
            return HubError(f'{what}: the repository {repo_id} has no '
                            'revision of that name.')
        if isinstance(error, errors.RepositoryNotFoundError):
            return HubError(
                f'{what}: the repository {repo_id} does not exist or is '
                'private (set HF_TOKEN if you have access).')
        if isinstance(error, errors.EntryNotFoundError):
            return ModelFileMissingError(
                f'{what}: the repository {repo_id} has no file '
                f'{self.filename}.')
        detail = ' '.join(str(error).split())[:300]
        return HubError(
            f'{what}: could not reach the Hub ({type(error).__name__}: '
            f'{detail}). Check the network / HF_ENDPOINT, or set '
            'HF_HUB_OFFLINE=1 to use the cache.')

    def timeout(self, seconds: float) -> HubTimeoutError:
        return HubTimeoutError(
            f'{self.what}: the server ({_endpoint()}) did not finish within '
            f'{seconds:g} s ({TIMEOUT_ENV} / {MIN_SPEED_ENV} set the '
            'limits). Check the network / HF_ENDPOINT, or set '
            'HF_HUB_OFFLINE=1 to use the cache.')

    def refused(self, problem: str) -> HubAnswerError:
        return HubAnswerError(
            f'{self.what}: refused the answer of {_endpoint()}: {problem}. '
            'A Hugging Face Hub never sends this; check HF_ENDPOINT. '
            'Nothing was written.')


def _shown(value) -> str:
    """``value`` for a one-line message (quoted, escaped, cut)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + '...'


def _is_repo_path(name: str) -> bool:
    """Whether ``name`` is a relative path without ``.`` / ``..``
    components, backslashes or control characters (a file in a repository,
    a revision name)."""
    return isinstance(name, str) and 0 < len(name) <= 1024 and all(
        _PART.fullmatch(part) and part not in ('.', '..')
        for part in name.split('/'))


def _check_revision(revision: str) -> str:
    if not _is_repo_path(revision):
        raise ValueError(f'{_shown(revision)} is not a Hub revision (a '
                         'branch, tag or commit, e.g. main, v1.0, '
                         'refs/pr/1).')
    return revision


def _check_repo_file(url: str, filename: str) -> str:
    if not _is_repo_path(filename):
        raise ValueError(f'{url}: {_shown(filename)} is not a file path in '
                         'a repository (relative, without "..").')
    return filename


# ---------------------------------------------------------------------------
# HTTP with overall limits, through huggingface_hub's configured client

_T = TypeVar('_T')


def _before(deadline: float, target: _Target, limit: float,
            call: Callable[[], _T]) -> _T:
    """``call()`` (a request whose answer's headers it waits for) in a
    helper thread, given up at ``deadline`` (``time.monotonic()``) with
    :class:`HubTimeoutError`: a server can hold a socket read open for ever
    by sending a byte now and then, which no per-read timeout ends. A
    thread given up on writes nothing; it ends with its socket timeout and
    closes a response that comes too late."""
    outcome: dict = {}
    lock = threading.Lock()
    done = threading.Event()

    def run():
        try:
            value = call()
        except BaseException as e:  # noqa: BLE001 (handed to the caller)
            with lock:
                outcome['error'] = e
        else:
            with lock:
                late = 'late' in outcome
                outcome['value'] = value
            if late and hasattr(value, 'close'):
                value.close()
        done.set()

    threading.Thread(target=run, name='sapiens_mm-hub-request',
                     daemon=True).start()
    done.wait(max(0.0, deadline - time.monotonic()))
    with lock:
        if 'error' in outcome:
            raise outcome['error']
        if 'value' in outcome:
            return outcome['value']
        outcome['late'] = True
    raise target.timeout(limit)


def _transport_errors() -> tuple:
    """The network error classes of the HTTP library ``huggingface_hub``
    uses (``httpx2`` / ``httpx``)."""
    return tuple(sys.modules[name].TransportError
                 for name in ('httpx2', 'httpx') if name in sys.modules)


def _headers() -> dict:
    """``huggingface_hub``'s request headers (user agent, ``HF_TOKEN``),
    asking for the bytes as stored."""
    from huggingface_hub.utils import build_hf_headers
    headers = build_hf_headers()
    headers['Accept-Encoding'] = 'identity'
    return headers


def _chunks(response, deadline: float, target: _Target,
            limit: float) -> Iterator[bytes]:
    """The body of ``response`` as it arrives, ending with
    :class:`HubTimeoutError` past ``deadline``."""
    for chunk in response.iter_bytes():
        if time.monotonic() > deadline:
            raise target.timeout(limit)
        if chunk:
            yield chunk


def _get(url: str, headers: dict, deadline: float, target: _Target,
         limit: float, silence: float, check: bool = True):
    """A streamed GET of ``url`` (redirects followed; ``huggingface_hub``'s
    HTTP client drops the token for another host) whose headers arrived
    before ``deadline`` (``limit`` seconds after the start, for the
    message), each socket read waiting at most ``silence`` seconds; an
    error status raised as the one-line :class:`HubError` of
    ``huggingface_hub``'s error type (``check=False``: returned)."""
    from huggingface_hub import get_session, hf_raise_for_status
    session = get_session()
    request = session.build_request(
        'GET', url, headers=headers,
        timeout=max(0.05, min(silence, deadline - time.monotonic())))
    response = _before(
        deadline, target, limit,
        lambda: session.send(request, stream=True, follow_redirects=True))
    if response.status_code < 400 or not check:
        return response
    try:  # read the message of the error, a bounded part of it
        body = bytearray()
        for chunk in _chunks(response, deadline, target, limit):
            body += chunk[:_ERROR_BODY_MAX - len(body)]
            if len(body) >= _ERROR_BODY_MAX:
                break
    finally:
        response.close()
    kept = {k: v for k, v in response.headers.items() if k.lower() not in
            ('content-encoding', 'content-length', 'transfer-encoding')}
    read = type(response)(response.status_code, headers=kept,
                          content=bytes(body), request=response.request)
    try:
        hf_raise_for_status(read)
    except Exception as e:  # noqa: BLE001 (every Hub error becomes a line)
        raise target.error(e) from None
    raise target.refused(f'HTTP status {response.status_code}')


# ---------------------------------------------------------------------------
# listing and metadata


def _listing(repo_id: str, revision: str, card: Optional[ModelCard],
             limits: HubLimits) -> Dict[str, HubFile]:
    """``{path: HubFile}`` of a repository revision (one API request,
    within ``limits.timeout`` and :data:`LISTING_MAX_BYTES`)."""
    target = _Target(repo_id, card=card)
    url = (f'{_endpoint()}/api/models/{repo_id}/revision/'
           f'{quote(revision, safe="")}?blobs=true')
    deadline = time.monotonic() + limits.timeout
    body = bytearray()
    try:
        response = _get(url, _headers(), deadline, target, limits.timeout,
                        limits.timeout)
        try:
            for chunk in _chunks(response, deadline, target,
                                 limits.timeout):
                body += chunk
                if len(body) > LISTING_MAX_BYTES:
                    raise target.refused(
                        f'a listing longer than {LISTING_MAX_BYTES >> 20} '
                        'MiB')
        finally:
            response.close()
    except HubError:
        raise
    except Exception as e:  # noqa: BLE001 (every Hub error becomes a line)
        raise target.error(e) from None
    return _parse_listing(bytes(body), repo_id, revision, target)


def _parse_listing(body: bytes, repo_id: str, revision: str,
                   target: _Target) -> Dict[str, HubFile]:
    try:
        siblings = json.loads(body).get('siblings') or []
        if not isinstance(siblings, list):
            raise ValueError
    except (ValueError, AttributeError, RecursionError):
        raise target.refused('a listing that is not the JSON of a Hub '
                             'repository') from None
    files = {}
    for entry in siblings:
        entry = entry if isinstance(entry, dict) else {}
        name = entry.get('rfilename')
        if not _is_repo_path(name):
            raise target.refused(f'a listed file name {_shown(name)} that '
                                 'is not a relative path in the repository')
        lfs = entry.get('lfs') if isinstance(entry.get('lfs'),
                                             dict) else None
        size = (lfs or entry).get('size')
        sha = lfs.get('sha256') if lfs else None
        if size is not None and not (isinstance(size, int) and size >= 0):
            raise target.refused(f'a size of {_shown(size)} for {name}')
        if sha is not None and not (isinstance(sha, str)
                                    and _SHA256.fullmatch(sha.lower())):
            raise target.refused(f'an SHA-256 of {_shown(sha)} for {name}')
        files[name] = HubFile(repo_id, revision, name, size,
                              sha.lower() if sha else None)
    return files


def _pinned(meta, listed: Optional[HubFile],
            target: _Target) -> Tuple[str, str, int]:
    """``(commit, etag, size)`` of a metadata answer, each checked before
    it names a path or bounds a transfer."""
    commit, etag, size = meta.commit_hash, meta.etag, meta.size
    if not (isinstance(commit, str) and _COMMIT.fullmatch(commit)):
        raise target.refused(f'the commit id (X-Repo-Commit) {_shown(commit)}'
                             ' is not 40 hexadecimal digits')
    etag = etag.lower() if isinstance(etag, str) else etag
    if not (isinstance(etag, str) and _ETAG.fullmatch(etag)):
        raise target.refused(f'the ETag {_shown(etag)} is not the 40- or '
                             '64-digit hexadecimal hash of a file')
    if not (isinstance(size, int) and size >= 0):
        raise target.refused('no size (X-Linked-Size / Content-Length) for '
                             'the file')
    if listed is not None and listed.size is not None and \
            listed.size != size:
        raise target.refused(f'{size} bytes announced for a file listed with '
                             f'{listed.size}')
    return commit, etag, size


# ---------------------------------------------------------------------------
# the cache layout


def _repo_dir(cache_dir: str, repo_id: str) -> Path:
    """The cache folder of a model repository (``models--<org>--<name>``,
    the Hugging Face cache layout)."""
    return Path(cache_dir) / '--'.join(('models', *repo_id.split('/')))


def _inside(root: Path, path: Path) -> Path:
    """``path``, after checking that it (its existing part resolved) lies
    in ``root``: a folder of the cache that is a link out of it is never
    written through."""
    real_root, real = osp.realpath(root), osp.realpath(path)
    if osp.commonpath([real_root, real]) != real_root:
        raise HubError(f'{path} leads out of the cache folder {root} '
                       f'(to {real}); remove that link from the cache.')
    return path


def _snapshot_dir(repo_id: str, revision: str,
                  cache_dir: str) -> Optional[Path]:
    """The cached snapshot folder of ``repo_id`` at ``revision``."""
    repo_dir = _repo_dir(cache_dir, repo_id)
    commit = revision
    if not _COMMIT.fullmatch(revision):
        ref = repo_dir / 'refs' / revision
        if not ref.is_file():
            return None
        commit = ref.read_text().strip()
        if not _COMMIT.fullmatch(commit):
            return None
    snapshot = repo_dir / 'snapshots' / commit
    return snapshot if snapshot.is_dir() else None


def cached_file(card: ModelCard, revision: Optional[str] = None,
                cache_dir: Optional[str] = None) -> Optional[str]:
    """The card's file in the local Hugging Face cache, or None (nothing
    is fetched)."""
    revision = _check_revision(revision or card.revision)
    snapshot = _snapshot_dir(card.repo_id, revision,
                             cache_dir or hub_cache_dir())
    if snapshot is None:
        return None
    names = [p.relative_to(snapshot).as_posix()
             for p in snapshot.rglob('*') if p.is_file()]
    name = _choose(card, names)
    if name is not None:
        return str(snapshot / name)
    if set(TRANSFORMERS_FILES) <= set(names):
        return str(snapshot)
    return None


def _host() -> str:
    return re.sub(r'[^\w-]', '-', socket.gethostname())[:64] or 'host'


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, owned by another user
        return True
    return True


def _last_write(path: Path) -> float:
    """The newest modification time of ``path`` and, for a folder (a Xet
    transfer's), of what it holds (links not followed)."""
    newest = path.lstat().st_mtime
    if stat.S_ISDIR(path.lstat().st_mode):
        for folder, _, files in os.walk(path):
            for name in files:
                with contextlib.suppress(OSError):
                    newest = max(newest, os.lstat(osp.join(folder,
                                                           name)).st_mtime)
    return newest


def _remove_leftovers(blob: Path) -> None:
    """Remove the temporary files (and Xet transfer folders) of downloads
    of ``blob`` that ended without cleaning up: of this host's dead
    processes, or untouched for an hour (a live HTTP transfer writes at
    least every ``timeout`` seconds, ``hf_xet`` at least every five
    minutes)."""
    ours = re.compile(re.escape(blob.name) +
                      r'\.[0-9a-f]{8}\.(\d+)@([\w-]+)(\.xet)?\.incomplete')
    host = _host()
    for path in blob.parent.glob(f'{blob.name}*.incomplete'):
        m = ours.fullmatch(path.name)
        try:
            if m is not None and m.group(2) == host:
                dead = not _alive(int(m.group(1)))
            else:
                dead = time.time() - _last_write(path) > _STALE_AFTER
            if not dead:
                continue
            if stat.S_ISDIR(path.lstat().st_mode):  # never through a link
                shutil.rmtree(path)
            else:
                path.unlink()
        except OSError:  # gone meanwhile, or not ours to remove
            pass


@contextlib.contextmanager
def _best_effort_lock(path: Path, wait: float, target: _Target):
    """Hold a lock on ``path`` when the file system supports it, so that
    one job downloads while the others wait. Correctness never depends on
    it: where ``flock`` does nothing (Lustre, GPFS, some NFS mounts) every
    job downloads its own copy."""
    from filelock import FileLock, Timeout
    lock = FileLock(str(path))
    held = False
    try:
        lock.acquire(timeout=wait)
        held = True
    except Timeout:
        print_log(f'{target.what}: another process held {path} for '
                  f'{wait:.0f} s; downloading without it.', logger='current',
                  level=logging.WARNING)
    except OSError:  # a read-only or lock-less .locks folder
        pass
    try:
        yield
    finally:
        if held:
            lock.release()


class _Digests:
    """The hashes of a download that its ETag and listing are checked
    against: SHA-256 always, the git blob SHA-1 for a 40-digit ETag."""

    def __init__(self, size: int, etag: str):
        self.size, self.etag = size, etag
        self.reset()

    def reset(self) -> None:
        self.sha256 = hashlib.sha256()
        self.git = hashlib.sha1(b'blob %d\0' % self.size) \
            if len(self.etag) == 40 else None

    def update(self, data: bytes) -> None:
        self.sha256.update(data)
        if self.git is not None:
            self.git.update(data)

    def mismatch(self, listed_sha256: Optional[str]) -> Optional[str]:
        """Why the content is not the expected file, or None."""
        sha = self.sha256.hexdigest()
        if self.git is not None and self.git.hexdigest() != self.etag:
            return (f'git SHA-1 {self.git.hexdigest()[:12]}... instead of '
                    f'its ETag {self.etag[:12]}...')
        if len(self.etag) == 64 and sha != self.etag:
            return f'SHA-256 {sha[:12]}... instead of its ETag ' \
                f'{self.etag[:12]}...'
        if listed_sha256 and sha != listed_sha256:
            return f'SHA-256 {sha[:12]}... instead of the listed ' \
                f'{listed_sha256[:12]}...'
        return None


def _receive_body(response, f, have: int, size: int, digests: _Digests,
                  deadline: float, target: _Target, limit: float,
                  bar) -> None:
    """Write the body of ``response`` after the ``have`` bytes of ``f``,
    never past ``size``."""
    status = response.status_code
    if have and status == 200:  # the range was ignored: from the start
        f.seek(0)
        f.truncate()
        digests.reset()
        bar.reset(total=size)
        have = 0
    elif have and status == 206:
        expected = f'bytes {have}-{size - 1}/{size}'
        if response.headers.get('Content-Range', '').strip() != expected:
            raise target.refused(
                f'Content-Range {_shown(response.headers.get("Content-Range"))}'
                f' for a request from byte {have}')
    elif status != 200:
        raise target.refused(f'HTTP status {status} for the file')
    length = response.headers.get('Content-Length')
    if length is not None and response.headers.get(
            'Content-Encoding', 'identity').lower() == 'identity' and (
                not length.strip().isdigit()
                or have + int(length) != size):
        raise target.refused(f'Content-Length {_shown(length)} for the '
                             f'{size - have} bytes left of the file')
    for chunk in _chunks(response, deadline, target, limit):
        if have + len(chunk) > size:
            raise target.refused(
                f'more bytes than the {size} it announced (the download '
                'was cut and discarded)')
        f.write(chunk)
        digests.update(chunk)
        bar.update(len(chunk))
        have += len(chunk)


def _transfer(url: str, tmp: Path, size: int, digests: _Digests,
              target: _Target, limits: HubLimits) -> None:
    """Download ``url`` (``size`` bytes) into the new file ``tmp``, within
    ``limits.transfer_seconds(size)``; a dropped connection is continued
    with a range request."""
    from huggingface_hub.utils import tqdm
    limit = limits.transfer_seconds(size)
    deadline = time.monotonic() + limit
    errors = _transport_errors()
    have, stalls, last = 0, 0, ''
    # 'x': created here, never opened through a file or link planted there
    with open(tmp, 'xb') as f, tqdm(total=size, unit='B', unit_scale=True,
                                    unit_divisor=1024, leave=False,
                                    desc=Path(target.filename).name[-40:],
                                    name='huggingface_hub.http_get') as bar:
        while True:
            headers = _headers()
            if have:
                headers['Range'] = f'bytes={have}-'
                print_log(f'{target.what}: the connection broke ({last}); '
                          f'continuing at byte {have}.', logger='current')
            before = have
            try:
                response = _get(url, headers, deadline, target, limit,
                                limits.timeout)
                try:
                    _receive_body(response, f, have, size, digests, deadline,
                                  target, limit, bar)
                finally:
                    response.close()
                last = 'the server ended the file early'
            except errors as e:
                if time.monotonic() >= deadline:
                    raise target.timeout(limit) from None
                last = f'{type(e).__name__}: {" ".join(str(e).split())}'
            have = f.tell()  # what arrived, also when the connection broke
            if have == size:
                return
            stalls = 0 if have > before else stalls + 1
            if stalls >= _STALLS:
                raise HubError(
                    f'{target.what}: the download stopped {_STALLS} times '
                    f'without progress at byte {have} of {size} ({last}). '
                    'Check the network / HF_ENDPOINT and try again.')


def _file_mismatch(path: Path, size: int, etag: str,
                   listed_sha256: Optional[str]) -> Optional[str]:
    """Why the file ``path`` (written by another process) is not the
    expected file, or None."""
    info = path.lstat()
    if not stat.S_ISREG(info.st_mode):
        return 'not a regular file'
    if info.st_size != size:
        return f'{info.st_size} bytes instead of {size}'
    digests = _Digests(size, etag)
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 22), b''):
            digests.update(block)
    return digests.mismatch(listed_sha256)


# ---------------------------------------------------------------------------
# Xet-backed files through hf_xet, in a child process


class _XetUnusable(Exception):
    """The Xet route cannot fetch this file (the reason, one line); the
    file is fetched over HTTP instead."""


@dataclass(frozen=True)
class _XetFile:
    """A Xet-backed file: its Xet hash, the Hub endpoint and the endpoint's
    route for an access token at the file's commit."""
    file_hash: str
    endpoint: str
    token_url: str


@dataclass(frozen=True)
class _XetAccess:
    """A CAS server and its access token, checked."""
    cas_url: str
    token: str
    expiry: int


def _xet_file(meta, repo_id: str, commit: str, endpoint: str,
              target: _Target) -> Optional[_XetFile]:
    """The Xet route of a metadata answer, or None for HTTP: ``hf_xet``
    is installed (and ``HF_HUB_DISABLE_XET`` unset) and the answer names a
    Xet file (``X-Xet-Hash`` and its token route, which
    ``get_hf_file_metadata`` parses). The token is asked for at the
    endpoint's own route for the checked commit, never at a URL the server
    names."""
    data = getattr(meta, 'xet_file_data', None)
    if data is None or _env_flag('HF_HUB_DISABLE_XET'):
        return None
    try:
        if importlib.util.find_spec('hf_xet') is None:
            return None
    except (ImportError, ValueError):
        return None
    file_hash = data.file_hash
    if not (isinstance(file_hash, str) and _XET_HASH.fullmatch(file_hash)):
        _xet_fallback(target, f'its Xet hash (X-Xet-Hash) {_shown(file_hash)}'
                      ' is not 64 hexadecimal digits')
        return None
    return _XetFile(file_hash, endpoint,
                    f'{endpoint}/api/models/{repo_id}/xet-read-token/{commit}')


def _xet_fallback(target: _Target, reason: str) -> None:
    print_log(f'{target.what}: not fetched through hf_xet ({reason}); '
              'downloading it over HTTP.', logger='current',
              level=logging.WARNING)


def _cas_problem(url, endpoint: str) -> Optional[str]:
    """Why ``url`` is not a CAS server address to use, or None: an
    ``https`` URL with a host (``http`` only when the endpoint is), never a
    local scheme."""
    if not (isinstance(url, str) and _VISIBLE.fullmatch(url)
            and len(url) <= 2048):
        return f'a CAS address {_shown(url)} that is not a URL'
    allowed = ('https', ) if urlsplit(endpoint).scheme == 'https' else (
        'https', 'http')
    try:
        parts = urlsplit(url)
        ok = parts.scheme in allowed and bool(parts.hostname) and \
            parts.username is None and parts.password is None
        parts.port  # noqa: B018 (raises on a malformed port)
    except ValueError:
        ok = False
    return None if ok else (f'a CAS address {_shown(url)} that is not an '
                            f'{" or ".join(allowed)} URL of a host')


def _xet_access(xet: _XetFile, target: _Target,
                limits: HubLimits) -> _XetAccess:
    """The CAS server and access token from the endpoint's token route
    (``X-Xet-Cas-Url``, ``X-Xet-Access-Token``, ``X-Xet-Token-Expiration``,
    as ``huggingface_hub`` reads them), within ``limits.timeout``.

    Raises:
        HubTimeoutError: The answer did not come in time.
        _XetUnusable: An error answer, or one that is not usable.
    """
    deadline = time.monotonic() + limits.timeout
    try:
        response = _get(xet.token_url, _headers(), deadline, target,
                        limits.timeout, limits.timeout, check=False)
    except HubTimeoutError:
        raise
    except Exception as e:  # noqa: BLE001 (any failure: HTTP instead)
        detail = ' '.join(f'{type(e).__name__}: {e}'.split())
        raise _XetUnusable(f'its Xet token request failed ({detail[:200]})')
    response.close()  # the answer is in the headers
    if response.status_code >= 400:
        raise _XetUnusable('its Xet token route answered HTTP '
                           f'{response.status_code}')
    headers = response.headers
    cas_url = headers.get('X-Xet-Cas-Url')
    token = headers.get('X-Xet-Access-Token')
    expiry = headers.get('X-Xet-Token-Expiration')
    problem = _cas_problem(cas_url, xet.endpoint)
    if problem is None and not (isinstance(token, str)
                                and _VISIBLE.fullmatch(token)):
        problem = 'no usable Xet access token'
    if problem is None and not (isinstance(expiry, str) and re.fullmatch(
            r'\d{1,12}', expiry.strip())):
        problem = f'a token expiration {_shown(expiry)} that is not a time'
    if problem is not None:
        raise _XetUnusable(f'its Xet token answer has {problem}')
    return _XetAccess(cas_url, token, int(expiry))


def _sizes(folder: Path, dest: Path) -> Tuple[int, int]:
    """``(size of dest, size of everything else under folder)``, in bytes
    (apparent sizes: a write far past the end counts)."""
    written = beside = 0
    for root, _, files in os.walk(folder):
        for name in files:
            path = osp.join(root, name)
            with contextlib.suppress(OSError):
                size = os.lstat(path).st_size
                if path == str(dest):
                    written = size
                else:
                    beside += size
    return written, beside


def _read_lines(stream, into: 'queue.Queue') -> None:
    """Put the JSON messages of ``stream`` into ``into``, then None."""
    try:
        for line in iter(lambda: stream.readline(1 << 16), b''):
            with contextlib.suppress(ValueError):
                message = json.loads(line)
                if isinstance(message, dict):
                    into.put(message)
    finally:
        into.put(None)


def _xet_transfer(xet: _XetFile, access: _XetAccess, folder: Path,
                  size: int, target: _Target, limits: HubLimits) -> Path:
    """Fetch the file with ``hf_xet`` into ``folder/file``: in a child
    process (:mod:`sapiens_mm.zoo.xet_child`) that is killed when the
    transfer passes ``limits.transfer_seconds(size)`` or writes more than
    ``size`` bytes (or ``hf_xet`` more than :data:`_XET_BESIDE_MAX` of its
    own files, which go to ``folder/xet``). Its progress moves
    ``huggingface_hub``'s progress bar.

    Returns:
        The file written (not yet checked).

    Raises:
        HubTimeoutError, HubAnswerError: A limit was passed (the child was
            killed).
        _XetUnusable: ``hf_xet`` does not import or failed.
    """
    from huggingface_hub.utils import build_hf_headers, tqdm
    dest = folder / 'file'
    limit = limits.transfer_seconds(size)
    headers = build_hf_headers()  # as huggingface_hub's own xet_get sends
    request = dict(
        cas_url=access.cas_url, token=access.token,
        token_expiry=access.expiry, token_refresh_url=xet.token_url,
        token_refresh_headers=headers,
        headers={k: v for k, v in headers.items()
                 if k.lower() != 'authorization'},
        hash=xet.file_hash, size=size, dest=str(dest),
        seconds=limit + _XET_GRACE)
    env = dict(os.environ, HF_XET_CACHE=str(folder / 'xet'))
    deadline = time.monotonic() + limit
    try:
        if not sys.executable:
            raise OSError('no Python executable (sys.executable is empty)')
        child = subprocess.Popen(
            [sys.executable, '-c', _SCRIPT,
             str(Path(__file__).with_name('xet_child.py'))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, cwd=folder, env=env)
    except OSError as e:
        raise _XetUnusable(f'no child process could be started: {e}')
    messages: 'queue.Queue' = queue.Queue()
    errors: collections.deque = collections.deque(maxlen=20)
    readers = [
        threading.Thread(target=_read_lines, args=(child.stdout, messages),
                         daemon=True),
        threading.Thread(target=lambda: errors.extend(
            iter(lambda: child.stderr.readline(1 << 12), b'')), daemon=True)
    ]
    for reader in readers:
        reader.start()
    outcome: dict = {}
    try:
        with contextlib.suppress(BrokenPipeError):  # it ended: see below
            child.stdin.write(json.dumps(request).encode() + b'\n')
            child.stdin.flush()
        with tqdm(total=size, unit='B', unit_scale=True, unit_divisor=1024,
                  leave=False, desc=Path(target.filename).name[-40:],
                  name='huggingface_hub.xet_get') as bar:
            ended = False
            while not (ended and child.poll() is not None):
                try:
                    message = messages.get(timeout=_XET_POLL)
                except queue.Empty:
                    message = {}
                if message is None:
                    ended = True
                elif isinstance(message.get('bytes'), int):
                    bar.update(max(0, min(message['bytes'], size) - bar.n))
                else:
                    outcome.update(message)
                written, beside = _sizes(folder, dest)
                if written > size:
                    raise target.refused(
                        f'more bytes than the {size} it announced (the Xet '
                        'download was cut and discarded)')
                if beside > _XET_BESIDE_MAX:
                    raise target.refused(
                        f'hf_xet wrote more than {_XET_BESIDE_MAX >> 20} MiB '
                        'of its own files for it (the Xet download was cut '
                        'and discarded)')
                if time.monotonic() > deadline:
                    raise target.timeout(limit)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        for reader in readers:
            reader.join(timeout=1)
        for stream in (child.stdin, child.stdout, child.stderr):
            with contextlib.suppress(OSError):
                stream.close()
    if outcome.get('done') and child.returncode == 0:
        return dest
    if 'unavailable' in outcome:
        raise _XetUnusable('hf_xet does not import in a child process: '
                           f'{outcome["unavailable"]}')
    if 'error' in outcome:
        raise _XetUnusable(f'hf_xet failed: {outcome["error"]}')
    last = errors[-1].decode(errors='replace').strip() if errors else ''
    raise _XetUnusable(f'the hf_xet process ended with exit code '
                       f'{child.returncode}' + (f': {last[:300]}'
                                                if last else ''))


# ---------------------------------------------------------------------------
# into the cache


def _via_http(url: str, blob: Path, name: str, size: int, etag: str,
              listed_sha256: Optional[str], target: _Target,
              limits: HubLimits) -> Optional[str]:
    """Download ``url`` into the temporary file ``<name>.incomplete``
    beside ``blob`` and rename it to ``blob`` when it is the file; else the
    reason (the file is discarded)."""
    tmp = blob.with_name(f'{name}.incomplete')
    digests = _Digests(size, etag)
    try:
        _transfer(url, tmp, size, digests, target, limits)
        problem = digests.mismatch(listed_sha256)
        if problem is None:
            os.replace(tmp, blob)
        return problem
    finally:
        if osp.lexists(tmp):
            os.remove(tmp)


def _via_xet(xet: _XetFile, blob: Path, name: str, size: int, etag: str,
             listed_sha256: Optional[str], target: _Target,
             limits: HubLimits) -> Optional[str]:
    """Fetch the file with ``hf_xet`` into the new folder
    ``<name>.xet.incomplete`` beside ``blob`` and rename it to ``blob``
    when it is the file; else the reason (the folder is removed).

    Raises:
        _XetUnusable: Not fetched through ``hf_xet``; use HTTP.
    """
    access = _xet_access(xet, target, limits)
    folder = blob.with_name(f'{name}.xet.incomplete')
    folder.mkdir(mode=0o700)  # new: never a planted folder or link
    try:
        dest = _xet_transfer(xet, access, folder, size, target, limits)
        problem = _file_mismatch(dest, size, etag, listed_sha256)
        if problem is None:
            os.replace(dest, blob)
        return problem
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _fetch_blob(url: str, blob: Path, size: int, etag: str,
                listed: Optional[HubFile], target: _Target,
                limits: HubLimits, xet: Optional[_XetFile] = None) -> None:
    """Make ``blob`` the checked file: fetched into a temporary file of
    this process (through ``hf_xet`` first when ``xet`` is given), checked,
    then renamed over ``blob``. A corrupt download is discarded and
    downloaded once more over HTTP; a Xet transfer that cannot be made
    falls back to HTTP at once; a limit passed ends it all."""
    blob.parent.mkdir(parents=True, exist_ok=True)
    _remove_leftovers(blob)
    lock = blob.with_name(f'{etag}.lock')  # in the repository's folder
    listed_sha = listed.sha256 if listed is not None else None
    problem = None
    with _best_effort_lock(lock, limits.transfer_seconds(size), target):
        for attempt in (1, 2):
            if blob.is_file() and blob.stat().st_size == size:
                return  # another job finished it meanwhile
            name = f'{etag}.{uuid.uuid4().hex[:8]}.{os.getpid()}@{_host()}'
            via_xet = attempt == 1 and xet is not None
            if via_xet:
                try:
                    problem = _via_xet(xet, blob, name, size, etag,
                                       listed_sha, target, limits)
                except _XetUnusable as e:
                    _xet_fallback(target, str(e))
                    via_xet = False
            if not via_xet:
                problem = _via_http(url, blob, name, size, etag, listed_sha,
                                    target, limits)
            if problem is None:
                return
            again = '' if attempt == 2 else '; downloading it again' + (
                ' over HTTP' if via_xet else '')
            print_log(f'{target.what}: the {"Xet " if via_xet else ""}'
                      f'download is corrupt ({problem}); discarded{again}.',
                      logger='current', level=logging.WARNING)
    raise CorruptDownloadError(
        f'{target.what}: the download is corrupt twice ({problem}); it was '
        'discarded and the cache left as it was. Check the network / '
        'HF_ENDPOINT mirror and try again.')


def _link(repo_dir: Path, blob: Path, commit: str, filename: str) -> Path:
    """Point ``snapshots/<commit>/<filename>`` at ``blob`` (a relative
    symbolic link, a copy where links are not supported), atomically."""
    pointer = _inside(repo_dir, repo_dir / 'snapshots' / commit / filename)
    pointer.parent.mkdir(parents=True, exist_ok=True)
    if pointer.is_file() and osp.samefile(pointer, blob):
        return pointer
    tmp = pointer.with_name(f'.{pointer.name}.{uuid.uuid4().hex[:8]}.link')
    try:
        os.symlink(osp.relpath(blob, pointer.parent), tmp)
    except OSError:
        shutil.copyfile(blob, tmp)
    os.replace(tmp, pointer)
    return pointer


def _record_ref(repo_dir: Path, revision: str, commit: str) -> None:
    """Write ``refs/<revision>`` (the commit it names), atomically, when
    the revision is a branch or tag."""
    if revision == commit:
        return
    ref = _inside(repo_dir, repo_dir / 'refs' / revision)
    if ref.is_file() and ref.read_text() == commit:
        return
    ref.parent.mkdir(parents=True, exist_ok=True)
    tmp = ref.with_name(f'.{ref.name}.{uuid.uuid4().hex[:8]}.tmp')
    tmp.write_text(commit)
    os.replace(tmp, ref)


def _download(repo_id: str, revision: str, filename: str,
              listed: Optional[HubFile], card: Optional[ModelCard],
              cache_dir: str, limits: HubLimits) -> str:
    """Fetch a file of a repository revision into the Hugging Face cache,
    checked before it enters it (see the module's notes)."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.utils import validate_repo_id
    target = _Target(repo_id, filename, card)
    try:
        validate_repo_id(repo_id)
    except ValueError:
        raise ValueError(f'{target.what}: {_shown(repo_id)} is not a Hub '
                         'repository id (<org>/<name>: letters, digits, '
                         '"-", "_", "."; no "--" or "..").') from None
    endpoint = _endpoint()
    try:
        url = hf_hub_url(repo_id, filename, revision=revision,
                         endpoint=endpoint)
        meta = _before(
            time.monotonic() + limits.timeout, target, limits.timeout,
            lambda: get_hf_file_metadata(url, timeout=limits.timeout,
                                         endpoint=endpoint))
    except Exception as e:  # noqa: BLE001 (every Hub error becomes a line)
        raise target.error(e) from None
    commit, etag, size = _pinned(meta, listed, target)
    repo_dir = _repo_dir(cache_dir, repo_id)
    pointer = repo_dir / 'snapshots' / commit / filename
    if pointer.is_file():  # this commit's file is cached
        with contextlib.suppress(OSError):  # a read-only shared cache
            _record_ref(repo_dir, revision, commit)
        return str(pointer)
    blob = _inside(repo_dir, repo_dir / 'blobs' / etag)
    if not (blob.is_file() and blob.stat().st_size == size):
        try:
            _fetch_blob(hf_hub_url(repo_id, filename, revision=commit,
                                   endpoint=endpoint), blob, size, etag,
                        listed, target, limits,
                        _xet_file(meta, repo_id, commit, endpoint, target))
        except (HubError, OSError):
            raise
        except Exception as e:  # noqa: BLE001 (every Hub error: a line)
            raise target.error(e) from None
    pointer = _link(repo_dir, blob, commit, filename)
    _record_ref(repo_dir, revision, commit)
    return str(pointer)


# ---------------------------------------------------------------------------
# what users call


def _choose(card: ModelCard, names: List[str]) -> Optional[str]:
    """The card's file among ``names``: its own name, else the one
    matching its pattern (the closest to its name when several do)."""
    if card.filename in names:
        return card.filename
    matches = [n for n in names
               if fnmatch.fnmatchcase(osp.basename(n), card.pattern)]
    if not matches:
        return None
    if len(matches) == 1:
        return matches[0]
    import difflib
    return max(matches, key=lambda n: difflib.SequenceMatcher(
        None, n, card.filename).ratio())


def fetch(card: ModelCard,
          revision: Optional[str] = None,
          check_remote: bool = False,
          limits: Optional[HubLimits] = None) -> str:
    """The local path of a registry model's file, downloaded if needed.

    Args:
        card: The model.
        revision: Hub revision (branch, tag or commit) instead of the
            card's.
        check_remote: Ask the Hub for the current listing even when a file
            is cached (a newer file on a branch is downloaded).
        limits: Time limits of the requests (default:
            :meth:`HubLimits.from_env`).

    Returns:
        Path of the file in the Hugging Face cache; when the revision holds
        no file of the card but a Transformers checkpoint (``config.json``
        + ``model.safetensors``), the folder of those two.

    Raises:
        HubError: (and subclasses) with a one-line message.
        ValueError: A malformed revision or limit setting.
    """
    revision = _check_revision(revision or card.revision)
    limits = limits or HubLimits.from_env()
    cache_dir = hub_cache_dir()
    cached = cached_file(card, revision, cache_dir)
    if is_offline():
        if cached is None:
            raise NotCachedError(
                f'{card.name} ({card.repo_id}, {card.pattern}) is not in the '
                f'Hugging Face cache {cache_dir} and HF_HUB_OFFLINE is set: '
                f'run `{python_command()} tools/download.py {card.name}` '
                'where the Hub '
                'is reachable (same HF_HOME / HF_HUB_CACHE), or unset '
                'HF_HUB_OFFLINE.')
        return cached
    if cached is not None and not check_remote:
        return cached
    files = _listing(card.repo_id, revision, card, limits)
    name = _choose(card, sorted(files))
    if name is None and set(TRANSFORMERS_FILES) <= set(files):
        # only the Transformers layout at this revision: its folder
        paths = [_download(card.repo_id, revision, n, files[n], card,
                           cache_dir, limits) for n in TRANSFORMERS_FILES]
        _log_licence(card, TRANSFORMERS_FILES[-1])
        return osp.dirname(paths[-1])
    if name is None:
        shown = ', '.join(sorted(files)[:8]) or 'none'
        raise ModelFileMissingError(
            f'{card.name}: the repository {card.repo_id} (revision '
            f'{revision}) has no file matching {card.pattern} (files: '
            f'{shown}{", ..." if len(files) > 8 else ""}).')
    from huggingface_hub import try_to_load_from_cache
    known = isinstance(
        try_to_load_from_cache(card.repo_id, name, cache_dir=cache_dir,
                               revision=revision), str)
    path = _download(card.repo_id, revision, name, files[name], card,
                     cache_dir, limits)
    if not known:
        _log_licence(card, name)
    return path


def _log_licence(card: ModelCard, name: str) -> None:
    print_log(
        f'{card.name}: downloaded {card.repo_id}/{name}. Licence: '
        f'{card.license} (see {card.page}); using the model means accepting '
        'it.', logger='current')


def parse_hf_url(url: str) -> Tuple[str, Optional[str], str]:
    """``(repo_id, revision, filename)`` of ``hf://org/repo[@rev]/file``.

    Raises:
        ValueError: Not of that form.
    """
    m = re.fullmatch(r'hf://(?P<org>[^/@]+)/(?P<repo>[^/@]+)(@(?P<rev>[^/]+))?'
                     r'/(?P<path>.+)', url)
    if m is None:
        raise ValueError(
            f'{url!r} is not a Hub file URL: write hf://<org>/<repo>/<file> '
            '(optionally hf://<org>/<repo>@<revision>/<file>) or '
            'hf://<registry name>.')
    return f'{m.group("org")}/{m.group("repo")}', m.group('rev'), \
        m.group('path')


def fetch_url(url: str, local_only: bool = False,
              limits: Optional[HubLimits] = None) -> str:
    """The local path of ``hf://org/repo[@rev]/file`` or ``hf://NAME`` (a
    registry model), downloaded if needed.

    Args:
        url: The URL.
        local_only: Only look in the cache (as for the ranks of a
            distributed job that wait for their node's download).
        limits: Time limits of the requests (default:
            :meth:`HubLimits.from_env`).

    Raises:
        HubError: (and subclasses), UnknownModelError, ValueError.
    """
    rest = url[len('hf://'):]
    if '/' not in rest:
        card = lookup_card(rest)
        if card is None:
            raise unknown_model_error(f'Unknown model {rest!r} in {url}',
                                      rest)
        if local_only:
            path = cached_file(card)
            if path is None:
                raise NotCachedError(f'{url}: not in the cache '
                                     f'{hub_cache_dir()}.')
            return path
        return fetch(card, limits=limits)
    repo_id, revision, filename = parse_hf_url(url)
    revision = _check_revision(revision or 'main')
    _check_repo_file(url, filename)
    from huggingface_hub import try_to_load_from_cache
    cache_dir = hub_cache_dir()
    cached = try_to_load_from_cache(repo_id, filename, cache_dir=cache_dir,
                                    revision=revision)
    if isinstance(cached, str):
        return cached
    if local_only or is_offline():
        raise NotCachedError(
            f'{url} is not in the Hugging Face cache {cache_dir}'
            + (' and HF_HUB_OFFLINE is set: download it where the Hub is '
               'reachable, or unset HF_HUB_OFFLINE.' if is_offline() else '.'))
    limits = limits or HubLimits.from_env()
    try:
        return _download(repo_id, revision, filename, None, None, cache_dir,
                          limits)
    except ModelFileMissingError:
        files = _listing(repo_id, revision, None, limits)  # what there is
    shown = ', '.join(sorted(files)[:8]) or 'none'
    raise ModelFileMissingError(
        f'{url}: the repository {repo_id} has no file {filename} (files: '
        f'{shown}{", ..." if len(files) > 8 else ""}).')


def resolve_checkpoint(spec: str,
                       revision: Optional[str] = None
                       ) -> Tuple[str, Optional[ModelCard]]:
    """A local checkpoint path for what a user named.

    Args:
        spec: A local file or Transformers folder, an ``hf://`` URL, or a
            registry name, alias or repository id (``'sapiens2-pose-0.4b'``,
            ``'facebook/sapiens2-pose-0.4b'``), optionally with a Hub
            revision after ``@`` (``'sapiens2-pose-0.4b@refs/pr/1'``).
        revision: Hub revision for a registry model (``@`` wins).

    Returns:
        ``(path, card)``; ``card`` is None unless a registry model was named.

    Raises:
        FileNotFoundError: ``spec`` looks like a path and does not exist.
        UnknownModelError: Neither a file nor a registry model; the message
            suggests the closest names.
        HubError: (and subclasses) the download failed.
    """
    text = osp.expanduser(str(spec))
    if osp.isfile(text) or is_transformers_folder(text):
        return text, None
    if text.startswith('hf://'):
        return fetch_url(text), lookup_card(text[len('hf://'):]) \
            if '/' not in text[len('hf://'):] else None
    name, _, at = text.partition('@')
    card = lookup_card(name)
    if card is not None:
        return fetch(card, at or revision), card
    if looks_like_model_path(text):
        raise FileNotFoundError(f'Checkpoint not found: {text}')
    raise unknown_model_error(f'{text!r} is neither a file nor a known model',
                              text)
