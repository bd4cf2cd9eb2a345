"""Manifests of a sharded run: one JSONL file per rank and run, merged
into one at the end.

Layout under the run's output folder::

    manifest.jsonl                  merged: one record per input, the latest
    summary.json                    counts and images/s per rank and in total
    manifests/run.json              the options of the run (checked on resume)
    manifests/<run id>.rank<r>.jsonl   what rank r recorded in that run
    manifests/progress.rank<r>.json    rank r's counters, in-flight input and,
                                       once it is done, its final numbers

A record is one line ``{"input", "name", "kind", "status", "outputs",
"error", "frames", "seconds", "rank"}``; ``status`` is ``"ok"`` or
``"failed"``, ``outputs`` are paths relative to the output folder. Records
are appended and flushed one by one (a killed process loses nothing it
recorded) and ``fsync``\\ ed at least every second (a crashed machine loses
at most the last second). Memory stays bounded in the number of inputs:
readers stream the files, and the done-set of a resumed rank and the merge
keep 8 bytes per input (a 64-bit hash of its name).
"""
import array
import hashlib
import json
import os
import os.path as osp
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
)

__all__ = [
    'MANIFEST_DIR', 'MERGED_NAME', 'SUMMARY_NAME', 'RUN_NAME', 'name_hash',
    'rank_manifest_path', 'progress_path', 'ManifestWriter',
    'manifest_files', 'iter_records', 'DoneIndex', 'merge_manifests',
    'read_progress', 'read_json'
]

#: ``<run id>.rank<r>.jsonl``: a rank's records of one run.
_RANK_FILE = re.compile(r'^(?P<run>\d{8}T\d{6}-[0-9a-f]{6})\.rank'
                        r'(?P<rank>\d{5})\.jsonl$')


def name_hash(name: str) -> int:
    """A stable 64-bit hash of an input's output name (BLAKE2b): the same
    in every process and run, unlike Python's ``hash``. It decides the rank
    of an input (``name_hash(name) % world_size``) and keys the done-set and
    the merge."""
    return int.from_bytes(
        hashlib.blake2b(name.encode('utf-8'), digest_size=8).digest(),
        'little')


def rank_manifest_path(out_dir: str, run_id: str, rank: int) -> str:
    """Where rank ``rank`` records the inputs of run ``run_id``."""
    return osp.join(out_dir, MANIFEST_DIR, f'{run_id}.rank{rank:05d}.jsonl')


def progress_path(out_dir: str, rank: int) -> str:
    """Rank ``rank``'s progress file (counters, in-flight input, final
    numbers)."""
    return osp.join(out_dir, MANIFEST_DIR, f'progress.rank{rank:05d}.json')


class ManifestWriter:
    """Appends records to one rank's manifest.

    Each record is written and flushed at once (it survives the process
    being killed; see :meth:`write` for the exception) and the file is
    ``fsync``\\ ed when ``sync_interval``
    seconds have passed since the last ``fsync`` and on :meth:`sync` /
    :meth:`close` (it survives the machine going down, up to that
    interval).

    Args:
        path: The manifest file (created with its folder; appended to).
        sync_interval: Seconds between ``fsync`` calls. Defaults to 1.
    """

    def __init__(self, path: str, sync_interval: float = 1.0) -> None:
        os.makedirs(osp.dirname(path), exist_ok=True)
        self.path = path
        self.sync_interval = sync_interval
        self._file = open(path, 'a', encoding='utf-8')
        self._synced = time.monotonic()

    def write(self, record: dict, flush: bool = True) -> None:
        """Append one record (a JSON-serialisable dict) as one line.

        Args:
            record: The record.
            flush: Hand it to the OS now. Records that are cheap to redo (an
                input found missing) can pass False: they are flushed with
                the next flushed record, or within ``sync_interval``.
        """
        self._file.write(json.dumps(record, ensure_ascii=False) + '\n')
        now = time.monotonic()
        if now - self._synced >= self.sync_interval:
            self.sync()
        elif flush:
            self._file.flush()

    def sync(self) -> None:
        """Flush and ``fsync`` what was written."""
        self._file.flush()
        os.fsync(self._file.fileno())
        self._synced = time.monotonic()

    def close(self) -> None:
        """:meth:`sync` and close the file."""
        if not self._file.closed:
            self.sync()
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
        if record is not None:
            yield record


def _iter_lines(paths: List[str]) -> Iterator[Tuple[str, Optional[dict]]]:
    """``(line, record)`` of every line of manifest files; record None for
    a line that is not a complete record (logged)."""
    for path in paths:
        with open(path, encoding='utf-8', errors='replace') as f:
            for n, line in enumerate(f, 1):
                try:
                    record = json.loads(line)
                except ValueError:
                    record = None
                if not isinstance(record, dict) or not isinstance(
                        record.get('name'), str):
                    record = None
                    if line.strip():
                        print_log(f'{path}:{n}: ignoring an incomplete '
                                  'record (its input is redone).',
                                  logger='current', level=30)
                yield line, record


def _raw_lines(paths: List[str]) -> Iterator[str]:
    """Every line of the files, as :func:`_iter_lines` reads them."""
    for path in paths:
        with open(path, encoding='utf-8', errors='replace') as f:
            yield from f


def _outputs_exist(out_dir: str, record: dict) -> bool:
    return all(
        osp.exists(osp.join(out_dir, o)) for o in record.get('outputs', ()))


class DoneIndex:
    """The inputs that an earlier run of ``out_dir`` finished: recorded
    ``"ok"`` with every recorded output still on disk.

    Built by streaming the manifests once; holds one 64-bit name hash per
    finished input (sorted, searched by bisection), and only those that
    ``keep`` accepts (a rank's own shard).

    Args:
        out_dir: The run's output folder.
        keep: Called with a name hash; whether this process needs it.
    """

    def __init__(self, out_dir: str,
                 keep: Callable[[int], bool] = lambda h: True) -> None:
        hashes = array.array('Q')
        for record in iter_records(manifest_files(out_dir)):
            if record.get('status') != 'ok':
                continue
            h = name_hash(record['name'])
            if keep(h) and _outputs_exist(out_dir, record):
                hashes.append(h)
        self._hashes = np.unique(np.frombuffer(hashes, dtype=np.uint64))

    def __len__(self) -> int:
        return len(self._hashes)

    def __contains__(self, h: int) -> bool:
        i = int(np.searchsorted(self._hashes, np.uint64(h)))
        return i < len(self._hashes) and int(self._hashes[i]) == h


def merge_manifests(out_dir: str) -> Dict[str, int]:
    """Merge every manifest of ``out_dir`` into ``manifest.jsonl``: one
    record per input, the latest (a later run's record of an input replaces
    an earlier one's), written atomically; then delete the merged rank
    files. One pass parses the records, a second copies the kept lines;
    memory: about 30 bytes per line.

    Returns:
        ``{status: number of inputs}`` of the merged manifest.
    """
    files = manifest_files(out_dir)
    hashes = array.array('Q')
    valid = array.array('b')  # per line: 1 a record, 0 not
    statuses: Dict[str, int] = {}
    status_of = array.array('B')  # per record: its index in ``statuses``
    for _, record in _iter_lines(files):
        valid.append(record is not None)
        if record is not None:
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


def read_progress(out_dir: str) -> List[Tuple[int, dict]]:
    """``(rank, progress)`` of every progress file of ``out_dir``, by
    rank (files that cannot be read are left out)."""
    folder = osp.join(out_dir, MANIFEST_DIR)
    found = []
    if not osp.isdir(folder):
        return found
    for name in sorted(os.listdir(folder)):
        m = re.match(r'^progress\.rank(\d{5})\.json$', name)
        if not m:
            continue
        try:
            with open(osp.join(folder, name), encoding='utf-8') as f:
                found.append((int(m.group(1)), json.load(f)))
        except (OSError, ValueError):
            continue
    return found


def read_json(path: str) -> Optional[dict]:
    """A small JSON file of the run (``run.json``, ``summary.json``), or
    None if it is missing or unreadable."""
    try:
        with open(path, encoding='utf-8') as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
