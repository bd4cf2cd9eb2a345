"""Model files from the Hugging Face Hub, through ``huggingface_hub``.

:func:`fetch` turns a registry card (see :mod:`sapiens_mm.zoo.cards`) into a
local file; :func:`resolve_checkpoint` turns whatever a user names as a
checkpoint (a path, a registry name or alias, a repository id, an
``hf://`` URL) into a local path.

The Hugging Face environment variables are honoured when each call is made:
``HF_HOME`` / ``HF_HUB_CACHE`` (where files are cached, shared with every
other Hugging Face tool), ``HF_ENDPOINT`` (a mirror), ``HF_TOKEN`` (gated
repositories), ``HF_HUB_OFFLINE`` (use the cache only).

- One download per file per machine: a file already in the cache for the
  card's revision is used without contacting the Hub (``check_remote=True``,
  as ``tools/download.py`` does, asks the Hub for the current listing).
- The file is chosen from the repository's listing: the card's file name, or
  else the file matching its ``File Pattern`` (names drift between a
  repository's variants).
- Downloads show a progress bar (``huggingface_hub``'s) and resume: a
  connection that drops is continued at once, and a download whose process
  stopped (killed, interrupted) is continued by the next run, both with an
  HTTP range request from the bytes kept in the cache as
  ``blobs/<etag>.incomplete`` (``huggingface_hub`` 1.x and later keep no
  partial file across processes, so the transfer is done here, through its
  ``http_get``, into the cache layout it reads).
- A new download is checked against the size and SHA-256 of the listing and
  of the card before it enters the cache; a mismatch deletes it and
  downloads it once more, then fails. A bad file is never returned.
- The licence of a model is logged when it is first downloaded.
- Every failure is one line that says what to do: a gated repository, an
  unknown name (with the closest names), a file missing from the repository,
  offline without the file in the cache, a corrupt download.
"""
import fnmatch
import hashlib
import os
import os.path as osp
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple
from urllib.parse import urlsplit

from mmengine.logging import print_log

from sapiens_mm.checkpoint import is_transformers_folder

from .cards import ModelCard, UnknownModelError, close_names, lookup_card

__all__ = [
    'HubError', 'GatedModelError', 'ModelFileMissingError',
    'NotCachedError', 'CorruptDownloadError', 'HubFile', 'fetch',
    'fetch_url', 'parse_hf_url', 'resolve_checkpoint', 'cached_file',
    'hub_cache_dir', 'is_offline', 'sha256_of'
]

#: The files of a Transformers checkpoint (read by
#: :func:`sapiens_mm.checkpoint.load_file` as a folder).
TRANSFORMERS_FILES = ('config.json', 'model.safetensors')
#: Checkpoint file extensions: a name with one of them is a path, not a
#: model name.
CHECKPOINT_SUFFIXES = ('.pth', '.pt', '.pt2', '.ckpt', '.bin',
                       '.safetensors', '.onnx')


class HubError(RuntimeError):
    """A model file could not be fetched from the Hub (one-line message)."""


class GatedModelError(HubError):
    """The repository is gated and the token (if any) has no access."""


class ModelFileMissingError(HubError):
    """The repository has no file matching the model's file pattern."""


class NotCachedError(HubError):
    """Offline, and the file is not in the cache."""


class CorruptDownloadError(HubError):
    """A downloaded file has the wrong size or SHA-256."""


def is_offline() -> bool:
    """Whether ``HF_HUB_OFFLINE`` (read now) forbids network access."""
    value = os.environ.get('HF_HUB_OFFLINE')
    if value is None:
        value = os.environ.get('TRANSFORMERS_OFFLINE', '')
    return value.strip().upper() in ('1', 'ON', 'YES', 'TRUE')


def hub_cache_dir() -> str:
    """The Hugging Face cache folder, from ``HF_HUB_CACHE`` or ``HF_HOME``
    as they are set now (default ``~/.cache/huggingface/hub``)."""
    if os.environ.get('HF_HUB_CACHE'):
        return osp.expanduser(os.environ['HF_HUB_CACHE'])
    home = os.environ.get('HF_HOME') or osp.join(
        os.environ.get('XDG_CACHE_HOME', osp.join('~', '.cache')),
        'huggingface')
    return osp.join(osp.expanduser(home), 'hub')


def _endpoint() -> Optional[str]:
    value = os.environ.get('HF_ENDPOINT')
    return value.rstrip('/') if value else None


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


def _what(card: Optional[ModelCard], repo_id: str, name: str) -> str:
    where = f'{repo_id}/{name}' if name else repo_id
    return f'{card.name} ({where})' if card is not None else where


def _hub_error(error: Exception, card: Optional[ModelCard], repo_id: str,
               filename: str = '') -> HubError:
    """One-line error for a ``huggingface_hub`` failure."""
    from huggingface_hub import errors
    what = _what(card, repo_id, filename)
    page = card.page if card is not None else \
        f'{_endpoint() or "https://huggingface.co"}/{repo_id}'
    if isinstance(error, errors.GatedRepoError):
        return GatedModelError(
            f'{what}: the repository {repo_id} is gated. Accept its licence '
            f'on {page} (logged in), then set HF_TOKEN to an access token of '
            'that account (https://huggingface.co/settings/tokens).')
    if isinstance(error, errors.RevisionNotFoundError):
        return HubError(f'{what}: the repository {repo_id} has no revision '
                        'of that name.')
    if isinstance(error, errors.RepositoryNotFoundError):
        return HubError(
            f'{what}: the repository {repo_id} does not exist or is private '
            '(set HF_TOKEN if you have access).')
    if isinstance(error, errors.EntryNotFoundError):
        return ModelFileMissingError(
            f'{what}: the repository {repo_id} has no file {filename}.')
    detail = ' '.join(str(error).split())[:300]
    return HubError(
        f'{what}: could not reach the Hub ({type(error).__name__}: {detail}).'
        ' Check the network / HF_ENDPOINT, or set HF_HUB_OFFLINE=1 to use '
        'the cache.')


def _listing(repo_id: str, revision: str,
             card: Optional[ModelCard]) -> Dict[str, HubFile]:
    """``{path: HubFile}`` of a repository revision (one API request)."""
    from huggingface_hub import HfApi
    try:
        info = HfApi(endpoint=_endpoint()).model_info(
            repo_id, revision=revision, files_metadata=True)
    except Exception as e:  # noqa: BLE001 (every Hub error becomes a line)
        raise _hub_error(e, card, repo_id) from None
    files = {}
    for sibling in info.siblings or ():
        lfs = getattr(sibling, 'lfs', None)
        files[sibling.rfilename] = HubFile(
            repo_id, revision, sibling.rfilename,
            size=(lfs.size if lfs is not None else sibling.size),
            sha256=(lfs.sha256 if lfs is not None else None))
    return files


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


def _repo_dir(cache_dir: str, repo_id: str) -> Path:
    """The cache folder of a model repository (``models--<org>--<name>``,
    named by ``huggingface_hub`` itself)."""
    from huggingface_hub.file_download import repo_folder_name
    return Path(cache_dir) / repo_folder_name(repo_id=repo_id,
                                              repo_type='model')


def _snapshot_dir(repo_id: str, revision: str,
                  cache_dir: str) -> Optional[Path]:
    """The cached snapshot folder of ``repo_id`` at ``revision``."""
    repo_dir = _repo_dir(cache_dir, repo_id)
    commit = revision
    if not re.fullmatch(r'[0-9a-f]{40}', revision):
        ref = repo_dir / 'refs' / revision
        if not ref.is_file():
            return None
        commit = ref.read_text().strip()
    snapshot = repo_dir / 'snapshots' / commit
    return snapshot if snapshot.is_dir() else None


def cached_file(card: ModelCard, revision: Optional[str] = None,
                cache_dir: Optional[str] = None) -> Optional[str]:
    """The card's file in the local Hugging Face cache, or None (nothing
    is fetched)."""
    revision = revision or card.revision
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


def _check(path: str, expected: HubFile, card: Optional[ModelCard]
           ) -> Optional[str]:
    """Why the downloaded ``path`` is not the expected file, or None."""
    sizes = {s for s in (expected.size,
                         card.file_size if card is not None else None)
             if s is not None}
    actual = osp.getsize(path)
    for size in sizes:
        if actual != size:
            return f'{actual} bytes instead of {size}'
    hashes = {h.lower() for h in (expected.sha256,
                                  card.sha256 if card is not None else None)
              if h}
    if hashes:
        digest = sha256_of(path)
        for h in hashes:
            if digest != h:
                return f'SHA-256 {digest[:12]}... instead of {h[:12]}...'
    return None


def _link(repo_dir: Path, blob: Path, commit: str, revision: str,
          filename: str) -> str:
    """Point ``snapshots/<commit>/<filename>`` at ``blob`` (a relative
    symbolic link, a copy where links are not supported) and record
    ``refs/<revision>`` when the revision is not the commit itself: the
    Hugging Face cache layout, which every Hugging Face tool reads."""
    pointer = repo_dir / 'snapshots' / commit / filename
    pointer.parent.mkdir(parents=True, exist_ok=True)
    if not (pointer.is_file()
            and osp.realpath(pointer) == osp.realpath(blob)):
        tmp = pointer.with_name(f'.{pointer.name}.{os.getpid()}.link')
        if osp.lexists(tmp):
            os.remove(tmp)
        try:
            os.symlink(osp.relpath(blob, pointer.parent), tmp)
        except OSError:
            import shutil
            shutil.copyfile(blob, tmp)
        os.replace(tmp, pointer)
    if revision != commit:
        ref = repo_dir / 'refs' / revision
        ref.parent.mkdir(parents=True, exist_ok=True)
        if not ref.is_file() or ref.read_text() != commit:
            ref.write_text(commit)
    return str(pointer)


def _resume(url: str, partial: Path, size: Optional[int], headers: dict,
            filename: str) -> None:
    """Download ``url`` into ``partial``, continuing the bytes already
    there with an HTTP range request (``huggingface_hub``'s ``http_get``:
    its progress bar, its retries of a dropped connection)."""
    from huggingface_hub.file_download import http_get
    have = partial.stat().st_size if partial.exists() else 0
    with open(partial, 'ab') as f:
        if size is not None and have > size:  # not the start of this file
            f.truncate(0)
            have = 0
        if have:
            print_log(f'{filename}: resuming the download at byte {have}.',
                      logger='current')
        http_get(url, f, resume_size=have, headers=headers,
                 expected_size=size, displayed_filename=filename)


def _download(hub_file: HubFile, card: Optional[ModelCard],
              cache_dir: str) -> str:
    """Download a file into the Hugging Face cache, resumable across
    processes, checked before it enters the cache.

    The bytes go to ``blobs/<etag>.incomplete`` in the repository's cache
    folder, under the lock ``huggingface_hub`` takes for the same blob
    (``.locks/models--<org>--<name>/<etag>.lock``): a download that
    stops, even by a killed process, is continued by the next one from
    where it stopped. The complete file is checked (size; SHA-256 of the
    listing and of the card), then renamed to ``blobs/<etag>`` and linked
    as ``snapshots/<commit>/<path>`` (``refs/<revision>`` recorded), the
    layout ``huggingface_hub`` itself writes and reads. A file that fails
    the check is deleted and downloaded once more, then refused.
    """
    from filelock import FileLock
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.utils import build_hf_headers
    repo_id, name = hub_file.repo_id, hub_file.filename
    what = _what(card, repo_id, name)
    url = hf_hub_url(repo_id, name, revision=hub_file.revision,
                     endpoint=_endpoint())
    try:
        meta = get_hf_file_metadata(url, endpoint=_endpoint())
        if not meta.commit_hash or not meta.etag:
            raise HubError(f'{what}: {url} answered without the '
                           'X-Repo-Commit / ETag headers of a Hugging Face '
                           'Hub; check HF_ENDPOINT.')
        headers = build_hf_headers()
        location = meta.location or url
        if urlsplit(location).netloc != urlsplit(url).netloc:
            headers.pop('authorization', None)  # a signed CDN URL
        repo_dir = _repo_dir(cache_dir, repo_id)
        blob = repo_dir / 'blobs' / meta.etag
        partial = blob.with_name(blob.name + '.incomplete')
        lock = Path(cache_dir) / '.locks' / repo_dir.name / \
            f'{meta.etag}.lock'
        blob.parent.mkdir(parents=True, exist_ok=True)
        lock.parent.mkdir(parents=True, exist_ok=True)
        for attempt in (1, 2):
            with FileLock(str(lock)):
                fresh = not blob.is_file()
                if fresh:
                    _resume(location, partial, meta.size, headers, name)
                candidate = partial if fresh else blob
                problem = _check(str(candidate), hub_file, card)
                if problem is None:
                    if fresh:
                        os.replace(partial, blob)
                    return _link(repo_dir, blob, meta.commit_hash,
                                 hub_file.revision, name)
                os.remove(candidate)
            print_log(f'{what}: the download is corrupt ({problem}); '
                      'deleted' + ('; downloading it again.'
                                   if attempt == 1 else '.'),
                      logger='current', level=30)
    except HubError:
        raise
    except Exception as e:  # noqa: BLE001 (every Hub error becomes a line)
        raise _hub_error(e, card, repo_id, name) from None
    raise CorruptDownloadError(
        f'{what}: the download is corrupt twice ({problem}); it was deleted.'
        ' Check the network / HF_ENDPOINT mirror and try again.')


def fetch(card: ModelCard,
          revision: Optional[str] = None,
          check_remote: bool = False) -> str:
    """The local path of a registry model's file, downloaded if needed.

    Args:
        card: The model.
        revision: Hub revision (branch, tag or commit) instead of the
            card's.
        check_remote: Ask the Hub for the current listing even when a file
            is cached (a newer file on a branch is downloaded).

    Returns:
        Path of the file in the Hugging Face cache; when the revision holds
        no file of the card but a Transformers checkpoint (``config.json``
        + ``model.safetensors``), the folder of those two.

    Raises:
        HubError: (and subclasses) with a one-line message.
    """
    revision = revision or card.revision
    cache_dir = hub_cache_dir()
    cached = cached_file(card, revision, cache_dir)
    if is_offline():
        if cached is None:
            raise NotCachedError(
                f'{card.name} ({card.repo_id}, {card.pattern}) is not in the '
                f'Hugging Face cache {cache_dir} and HF_HUB_OFFLINE is set: '
                f'run `python tools/download.py {card.name}` where the Hub '
                'is reachable (same HF_HOME / HF_HUB_CACHE), or unset '
                'HF_HUB_OFFLINE.')
        return cached
    if cached is not None and not check_remote:
        return cached
    files = _listing(card.repo_id, revision, card)
    name = _choose(card, sorted(files))
    if name is None and set(TRANSFORMERS_FILES) <= set(files):
        # only the Transformers layout at this revision: its folder
        paths = [_download(files[n], card, cache_dir)
                 for n in TRANSFORMERS_FILES]
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
    path = _download(files[name], card, cache_dir)
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


def fetch_url(url: str, local_only: bool = False) -> str:
    """The local path of ``hf://org/repo[@rev]/file`` or ``hf://NAME`` (a
    registry model), downloaded if needed.

    Args:
        url: The URL.
        local_only: Only look in the cache (as for the non-zero ranks of a
            distributed job, after rank 0 downloaded).

    Raises:
        HubError: (and subclasses), UnknownModelError, ValueError.
    """
    rest = url[len('hf://'):]
    if '/' not in rest:
        card = lookup_card(rest)
        if card is None:
            close = close_names(rest)
            raise UnknownModelError(
                f'Unknown model {rest!r} in {url}'
                + (f'; did you mean {", ".join(close)}?' if close else '.'))
        if local_only:
            path = cached_file(card)
            if path is None:
                raise NotCachedError(f'{url}: not in the cache '
                                     f'{hub_cache_dir()}.')
            return path
        return fetch(card)
    repo_id, revision, filename = parse_hf_url(url)
    revision = revision or 'main'
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
    files = _listing(repo_id, revision, None)
    if filename not in files:
        shown = ', '.join(sorted(files)[:8]) or 'none'
        raise ModelFileMissingError(
            f'{url}: the repository {repo_id} has no file {filename} (files: '
            f'{shown}{", ..." if len(files) > 8 else ""}).')
    return _download(files[filename], None, cache_dir)


def _looks_like_path(text: str) -> bool:
    return (os.sep in text and not re.fullmatch(r'[\w.-]+/[\w.-]+', text)) \
        or text.lower().endswith(CHECKPOINT_SUFFIXES) or text.startswith(
            ('.', '~'))


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
    if _looks_like_path(text):
        raise FileNotFoundError(f'Checkpoint not found: {text}')
    close = close_names(text)
    raise UnknownModelError(
        f'{text!r} is neither a file nor a known model'
        + (f'; did you mean {", ".join(close)}?' if close else '.')
        + ' `python tools/download.py --list` lists every model.')
