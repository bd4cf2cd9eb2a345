"""Manifests of a sharded run: one JSONL file per rank and run, merged
into one at the end.

Layout under the run's output folder::

    manifest.jsonl                  merged: one record per input, the latest
    summary.json                    counts and images/s per rank and in total
    manifests/run.json              the options of the run (checked on resume)
    manifests/<run id>.rank<r>.jsonl   what rank r recorded in that run
    manifests/<run id>.shard<r>.jsonl  rank r's inputs, as rank 0 listed them
                                       (:mod:`.listing`; removed at the end)
    manifests/progress.rank<r>.json    rank r's counters, in-flight inputs,
                                       heartbeat and, once it is done, its
                                       final numbers

A record is one line ``{"input", "name", "kind", "status", "outputs",
"error", "frames", "seconds", "rank"}``; ``status`` is ``"ok"`` or
``"failed"``, ``outputs`` are paths relative to the output folder. Records
are appended and flushed one by one (a killed process loses nothing it
recorded).

Durability: the outputs of an input are written atomically (temporary file
and rename) but not ``fsync``\\ ed one by one. At least once a second, and
when the rank ends, :meth:`ManifestWriter.sync` writes the file system's
dirty data to disk in one call (:func:`sync_file_system`) and then appends
a commit line ``{"synced": n}``: every record above a commit line names
outputs that were on disk before it was written. On resume, those records
are trusted as they are; only the records after a file's last commit line
(the last second of a rank that was killed, or of a machine that went down)
have their outputs checked (present and not empty). The merged manifest is
written after every rank committed, so all its records are trusted.

Memory stays bounded in the number of inputs: readers stream the files, and
the done-set and the merge keep 8 bytes per input (a 64-bit hash of its
name).
"""
import array
import ctypes
import functools
import json
import os
import os.path as osp
import posixpath
import re
import time
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np
from mmengine.logging import print_log

from sapiens_mm.engine.fileio import atomic_path
from sapiens_mm.utils.sharded_names import (
    MANIFEST_DIR,
    MERGED_NAME,
    RUN_NAME,
    SUMMARY_NAME,
    name_hash,
)

__all__ = [
    'MANIFEST_DIR', 'MERGED_NAME', 'SUMMARY_NAME', 'RUN_NAME', 'SYNC_KEY',
    'name_hash', 'rank_manifest_path', 'progress_path', 'ManifestWriter',
    'manifest_files', 'iter_records', 'DoneIndex', 'merge_manifests',
    'read_progress', 'read_rank_progress', 'read_json', 'sync_file_system',
    'RUN_ID_PATTERN', 'untrusted_outputs', 'is_name_inside'
]

#: A run id: its start time and 6 random hex digits.
RUN_ID_PATTERN = r'\d{8}T\d{6}-[0-9a-f]{6}'
#: ``<run id>.rank<r>.jsonl``: a rank's records of one run.
_RANK_FILE = re.compile(rf'^(?P<run>{RUN_ID_PATTERN})\.rank'
                        r'(?P<rank>\d{5})\.jsonl$')
#: The key of a manifest's commit lines (:meth:`ManifestWriter.sync`).
SYNC_KEY = 'synced'
#: Records after a file's last commit line whose outputs are checked in
#: one go (bounds the memory of a file without commit lines).
_PENDING_MAX = 10000


def rank_manifest_path(out_dir: str, run_id: str, rank: int) -> str:
    """Where rank ``rank`` records the inputs of run ``run_id``."""
    return osp.join(out_dir, MANIFEST_DIR, f'{run_id}.rank{rank:05d}.jsonl')


def progress_path(out_dir: str, rank: int) -> str:
    """Rank ``rank``'s progress file (counters, in-flight inputs, heartbeat,
    final numbers)."""
    return osp.join(out_dir, MANIFEST_DIR, f'progress.rank{rank:05d}.json')


@functools.lru_cache(maxsize=None)
def _libc_syncfs() -> Optional[Callable[[int], int]]:
    """Linux's ``syncfs(fd)`` from the C library, or None elsewhere."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def sync_file_system(path: str) -> None:
    """Write the dirty data of the file system that holds ``path`` to disk
    and wait for it: one call that makes every file written there since
    the last call durable (Linux ``syncfs``; ``os.sync``, every file
    system, elsewhere). The sharded runs call it once a second instead of
    an ``fsync`` per output file (``tools/analysis/fsync_cost.py`` measures
    the difference).

    Raises:
        OSError: The data could not be written (an I/O error, a lost
            mount); the message names ``path``.
    """
    syncfs = _libc_syncfs()
    if syncfs is None:
        os.sync()
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        if syncfs(fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f'Could not write the file system of {path} '
                          f'to disk: {os.strerror(err)}.')
    finally:
        os.close(fd)


class ManifestWriter:
    """Appends records to one rank's manifest.

    Each record is written and flushed at once (it survives the process
    being killed; see :meth:`write` for the exception). When
    ``sync_interval`` seconds have passed since the last commit, and on
    :meth:`sync` / :meth:`close`, the records written since are committed:
    the file system is written to disk (:func:`sync_file_system`: the
    outputs the records name and the records themselves) and a commit line
    is appended (see the module's documentation).

    Args:
        path: The manifest file (created with its folder; appended to).
        sync_interval: Seconds between commits. Defaults to 1.
    """

    def __init__(self, path: str, sync_interval: float = 1.0) -> None:
        os.makedirs(osp.dirname(path), exist_ok=True)
        self.path = path
        self.sync_interval = sync_interval
        self._file = open(path, 'a', encoding='utf-8')
        self._synced = time.monotonic()
        self._records = 0
        self._committed = 0

    def write(self, record: dict, flush: bool = True) -> None:
        """Append one record (a JSON-serialisable dict) as one line.

        Args:
            record: The record.
            flush: Hand it to the OS now. Records that are cheap to redo (an
                input found missing) can pass False: they are flushed with
                the next flushed record, or within ``sync_interval``.
        """
        self._file.write(json.dumps(record, ensure_ascii=False) + '\n')
        self._records += 1
        now = time.monotonic()
        if now - self._synced >= self.sync_interval:
            self.sync()
        elif flush:
            self._file.flush()

    def sync(self) -> None:
        """Commit what was written: flush, write the file system to disk,
        append a commit line."""
        self._file.flush()
        if self._records > self._committed:
            sync_file_system(self.path)
            self._file.write(json.dumps({SYNC_KEY: self._records}) + '\n')
            self._file.flush()
            self._committed = self._records
        self._synced = time.monotonic()

    def close(self) -> None:
        """:meth:`sync`, ``fsync`` (the last commit line too) and close the
        file."""
        if not self._file.closed:
            self.sync()
            os.fsync(self._file.fileno())
            self._file.close()


def manifest_files(out_dir: str) -> List[str]:
    """The manifests of ``out_dir`` in the order their records were made:
    the merged manifest first, then each run's rank files (runs by start
    time, ranks in order)."""
    files = []
    merged = osp.join(out_dir, MERGED_NAME)
    if osp.isfile(merged):
        files.append(merged)
    folder = osp.join(out_dir, MANIFEST_DIR)
    if osp.isdir(folder):
        ranked = []
        for name in os.listdir(folder):
            m = _RANK_FILE.match(name)
            if m:
                ranked.append((m['run'], int(m['rank']), name))
        files += [osp.join(folder, n) for _, _, n in sorted(ranked)]
    return files


def iter_records(paths: List[str]) -> Iterator[dict]:
    """The records of manifest files, one at a time. A line that is not a
    complete record (the end of a file whose writer was killed mid-line) is
    skipped with a warning: that input was not recorded and is redone."""
    for _, record in _iter_lines(paths):
        if isinstance(record, dict):
            yield record


#: What :func:`_iter_lines` gives for a commit line.
_COMMIT = 'commit'


def _iter_lines(paths: List[str]) -> Iterator[Tuple[int, object]]:
    """``(line number, record)`` of every line of manifest files; record
    is the dict of a record, :data:`_COMMIT` for a commit line, None for a
    line that is not a complete record (logged)."""
    for path in paths:
        with open(path, encoding='utf-8', errors='replace') as f:
            for n, line in enumerate(f, 1):
                try:
                    record = json.loads(line)
                except ValueError:
                    record = None
                if isinstance(record, dict) and isinstance(
                        record.get('name'), str):
                    pass
                elif isinstance(record, dict) and set(record) == {SYNC_KEY}:
                    record = _COMMIT
                else:
                    record = None
                    if line.strip():
                        print_log(f'{path}:{n}: ignoring an incomplete '
                                  'record (its input is redone).',
                                  logger='current', level=30)
                yield n, record


def _raw_lines(paths: List[str]) -> Iterator[str]:
    """Every line of the files, as :func:`_iter_lines` reads them."""
    for path in paths:
        with open(path, encoding='utf-8', errors='replace') as f:
            yield from f


def untrusted_outputs(record: dict, require_outputs: bool = True
                      ) -> Optional[str]:
    """Why the outputs an ``ok`` record names cannot be taken as its
    input's results (None when they can): not a list of file names,
    none while the run writes files for every input, or a name outside the
    output folder (absolute, ``..``, not normalised, or in
    ``manifests/``). A manifest is a file a user or another program may
    have edited: such a record's input is redone."""
    outputs = record.get('outputs', [])
    if not isinstance(outputs, list) or not all(
            isinstance(o, str) for o in outputs):
        return 'its outputs are not a list of file names'
    if require_outputs and not outputs:
        return 'it names no output file'
    for o in outputs:
        if (not is_name_inside(o) or '\\' in o
                or o.split('/')[0] == MANIFEST_DIR):
            return f'its output {o!r} is not a file inside the output folder'
    return None


def is_name_inside(name) -> bool:
    """Whether ``name`` is a file name relative to a folder that stays
    inside it: a normalised ``/``-separated relative path, not ``.``, not
    ``..`` or below it, no NUL."""
    return (isinstance(name, str) and name == posixpath.normpath(name)
            and not name.startswith(('/', '../')) and name not in ('.', '..')
            and '\0' not in name)


def _outputs_on_disk(out_dir: str, record: dict) -> bool:
    """Whether every output of ``record`` exists and is not empty (an
    output written just before a machine went down may be either)."""
    for o in record.get('outputs', ()):
        try:
            if os.stat(osp.join(out_dir, o)).st_size == 0:
                return False
        except OSError:
            return False
    return True


class DoneIndex:
    """The inputs that an earlier run of ``out_dir`` finished: recorded
    ``"ok"`` with outputs inside the output folder, and, for the records
    after a manifest's last commit line, those outputs on disk (see the
    module's documentation: committed records are not checked one output
    at a time).

    Built by streaming the manifests once; holds one 64-bit name hash per
    finished input (sorted, searched by bisection). An ``ok`` record that names no output (where
    ``require_outputs``) or a file outside the output folder is not
    trusted: its input is redone, and one line says so.

    Args:
        out_dir: The run's output folder.
        require_outputs: Every input of the run writes files (inference;
            curation records none).

    Attributes:
        untrusted: The number of ``ok`` records not trusted.
    """

    def __init__(self, out_dir: str, require_outputs: bool = True) -> None:
        hashes = array.array('Q')
        self.untrusted = 0
        first_untrusted = None
        for path in manifest_files(out_dir):
            committed = osp.basename(path) == MERGED_NAME
            pending: List[Tuple[int, dict]] = []
            for n, record in _iter_lines([path]):
                if record is _COMMIT:
                    hashes.extend(h for h, _ in pending)
                    pending = []
                    continue
                if record is None or record.get('status') != 'ok':
                    continue
                h = name_hash(record['name'])
                why = untrusted_outputs(record, require_outputs)
                if why is not None:
                    self.untrusted += 1
                    if first_untrusted is None:
                        first_untrusted = (f'{path}:{n} ({record["name"]!r}: '
                                           f'{why})')
                elif committed:
                    hashes.append(h)
                else:
                    pending.append((h, record))
                    if len(pending) >= _PENDING_MAX:
                        hashes.extend(_checked(out_dir, pending))
                        pending = []
            hashes.extend(_checked(out_dir, pending))
        self._hashes = np.unique(np.frombuffer(hashes, dtype=np.uint64))
        if self.untrusted:
            print_log(f'{self.untrusted} record(s) marked "ok" in the '
                      f'manifests of {out_dir} are not trusted, first '
                      f'{first_untrusted}: their inputs are redone.',
                      logger='current', level=30)

    def __len__(self) -> int:
        return len(self._hashes)

    def __contains__(self, h: int) -> bool:
        i = int(np.searchsorted(self._hashes, np.uint64(h)))
        return i < len(self._hashes) and int(self._hashes[i]) == h


def _checked(out_dir: str, pending: List[Tuple[int, dict]]) -> List[int]:
    """The hashes of the uncommitted records whose outputs are on disk."""
    return [h for h, record in pending if _outputs_on_disk(out_dir, record)]


def merge_manifests(out_dir: str) -> Dict[str, int]:
    """Merge every manifest of ``out_dir`` into ``manifest.jsonl``: one
    record per input, the latest (a later run's record of an input replaces
    an earlier one's), written atomically; then delete the merged rank
    files. One pass parses the records, a second copies the kept lines
    (commit lines are dropped: every rank has committed when the merge
    runs); memory: about 30 bytes per line.

    Returns:
        ``{status: number of inputs}`` of the merged manifest.
    """
    files = manifest_files(out_dir)
    hashes = array.array('Q')
    valid = array.array('b')  # per line: 1 a record, 0 not
    statuses: Dict[str, int] = {}
    status_of = array.array('B')  # per record: its index in ``statuses``
    for _, record in _iter_lines(files):
        is_record = isinstance(record, dict)
        valid.append(is_record)
        if is_record:
            hashes.append(name_hash(record['name']))
            status = str(record.get('status'))
            status_of.append(statuses.setdefault(status, len(statuses)))
    h = np.frombuffer(hashes, dtype=np.uint64)
    # The last record of each name: the first in reversed order.
    _, first_reversed = np.unique(h[::-1], return_index=True)
    keep = np.zeros(len(h), bool)
    keep[len(h) - 1 - first_reversed] = True
    del h, hashes, first_reversed
    kept_status = np.bincount(
        np.frombuffer(status_of, dtype=np.uint8)[keep],
        minlength=len(statuses))
    counts = {s: int(kept_status[i]) for s, i in statuses.items()
              if kept_status[i]}
    merged = osp.join(out_dir, MERGED_NAME)
    with atomic_path(merged) as tmp:
        with open(tmp, 'w', encoding='utf-8') as out:
            i = 0  # record index
            for is_record, line in zip(valid, _raw_lines(files)):
                if is_record:
                    if keep[i]:
                        out.write(line if line.endswith('\n') else
                                  line + '\n')
                    i += 1
            out.flush()
            os.fsync(out.fileno())
    for path in files:
        if osp.basename(path) != MERGED_NAME:
            os.remove(path)  # its records are in the merged manifest now
    return counts


#: The fields of a progress file and their types (:func:`read_progress`).
_PROGRESS_FIELDS = dict(run_id=str, rank=int, world_size=int, ok=int,
                        failed=int, skipped=int, frames=int,
                        seconds=(int, float), in_flight=list,
                        finished=bool)


def _progress_problem(progress) -> Optional[str]:
    """What makes a parsed progress file unusable, or None."""
    if not isinstance(progress, dict):
        return f'holds a JSON {type(progress).__name__}, not an object'
    for key, kind in _PROGRESS_FIELDS.items():
        if key not in progress:
            return f'has no "{key}"'
        value = progress[key]
        if not isinstance(value, kind) or (kind is int and isinstance(
                value, bool)):
            return f'"{key}" is {value!r}'
    return None


def read_progress(out_dir: str, problems: Optional[List[str]] = None
                  ) -> List[Tuple[int, dict]]:
    """``(rank, progress)`` of every progress file of ``out_dir``, by
    rank. Files that cannot be read or are not progress files (a missing
    field, a field of another type) are left out; with ``problems``, one
    line per such file is appended to it."""
    folder = osp.join(out_dir, MANIFEST_DIR)
    found = []
    if not osp.isdir(folder):
        return found
    for name in sorted(os.listdir(folder)):
        m = re.match(r'^progress\.rank(\d{5})\.json$', name)
        if not m:
            continue
        path = osp.join(folder, name)
        progress, problem = _load_progress(path, int(m.group(1)))
        if progress is not None:
            found.append((int(m.group(1)), progress))
        elif problem is not None and problems is not None:
            problems.append(f'{path}: not a progress file of a sharded run '
                            f'({problem}); ignored.')
    return found


def read_rank_progress(out_dir: str, rank: int) -> Optional[dict]:
    """Rank ``rank``'s progress (:func:`read_progress`), or None when its
    file is missing or is not a progress file."""
    return _load_progress(progress_path(out_dir, rank), rank)[0]


def _load_progress(path: str, rank: int
                   ) -> Tuple[Optional[dict], Optional[str]]:
    """``(progress, None)`` when ``path`` is rank ``rank``'s progress
    file, ``(None, why not)`` when it is not, ``(None, None)`` when it is
    missing (or was replaced between a listing and the read)."""
    try:
        with open(path, encoding='utf-8') as f:
            progress = json.load(f)
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as e:
        return None, f'cannot be read as JSON ({e})'
    problem = _progress_problem(progress)
    if problem is None and progress['rank'] != rank:
        problem = f'says rank {progress["rank"]}, its name rank {rank}'
    return (None, problem) if problem is not None else (progress, None)


def read_json(path: str) -> Optional[dict]:
    """A small JSON file of the run (``run.json``, ``summary.json``), or
    None if it is missing or unreadable."""
    try:
        with open(path, encoding='utf-8') as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
