"""The input listing of a sharded run, walked once.

Rank 0 alone goes through the inputs (a folder walk, a list file, a glob:
on a shared file system the expensive part of a large run's start), gives
each input its rank (``name_hash(name) % world_size``), leaves out the
inputs an earlier run finished (:class:`~.manifest.DoneIndex`, read by rank
0 alone) and appends the others to their rank's shard file,
``manifests/<run id>.shard<r>.jsonl``: one ``[name, path, kind]`` line per
input, then an end line ``{"end": true, "skipped": n}`` (or ``{"error":
...}`` when the listing failed). With several ranks, every rank, rank 0
included, reads its shard file as it grows, so the ranks start working
while the listing goes on (a single process takes its inputs from the
listing directly); a rank that waits for entries watches rank 0's heartbeat and stops
when rank 0 is lost. Shard files are appended in chunks and re-opened by
their readers (what makes appends visible across the nodes of a network
file system); they are not results, and are never ``fsync``\\ ed.
"""
import json
import os
import os.path as osp
import re
import time
from dataclasses import dataclass
from typing import Callable, Iterator, List, Optional

from sapiens_mm.utils.sharded_names import MANIFEST_DIR

from .manifest import RUN_ID_PATTERN

__all__ = ['ListedItem', 'shard_path', 'SHARD_FILE', 'ShardWriter',
           'ListingFailed', 'read_shard', 'remove_shard_files']

#: ``<run id>.shard<r>.jsonl``: the inputs rank 0 listed for rank r.
SHARD_FILE = re.compile(rf'^(?P<run>{RUN_ID_PATTERN})\.shard\d{{5}}\.jsonl$')


@dataclass
class ListedItem:
    """An input as a shard file holds it (what a sharded run needs of it:
    :class:`~.run.Item`)."""
    name: str
    path: str
    kind: str


class ListingFailed(ValueError):
    """Rank 0 could not list the inputs (a bad list file line, a missing
    folder...); the message is rank 0's error."""


def shard_path(out_dir: str, run_id: str, rank: int) -> str:
    """Rank ``rank``'s shard file of run ``run_id``."""
    return osp.join(out_dir, MANIFEST_DIR, f'{run_id}.shard{rank:05d}.jsonl')


class ShardWriter:
    """Rank 0's appends to every rank's shard file.

    Entries are buffered per rank and appended (open, write, close) when a
    rank has ``chunk`` of them or ``flush_s`` seconds have passed, so that
    the readers get work early and a run of thousands of ranks keeps no
    file open.

    Args:
        out_dir: The run's output folder.
        run_id: The run.
        world_size: Number of ranks.
        chunk: Entries per append.
        flush_s: Longest time an entry waits in the buffer.
    """

    def __init__(self, out_dir: str, run_id: str, world_size: int,
                 chunk: int = 256, flush_s: float = 0.5) -> None:
        self.paths = [shard_path(out_dir, run_id, r)
                      for r in range(world_size)]
        self.chunk, self.flush_s = chunk, flush_s
        self._buffers: List[List[str]] = [[] for _ in range(world_size)]
        self._flushed = time.monotonic()
        for path in self.paths:  # every reader finds its file
            open(path, 'a', encoding='utf-8').close()

    def add(self, rank: int, item) -> None:
        """Append ``item`` (``name``, ``path``, ``kind``) to ``rank``'s
        shard."""
        buffer = self._buffers[rank]
        buffer.append(json.dumps([item.name, item.path, item.kind],
                                 ensure_ascii=False))
        if len(buffer) >= self.chunk:
            self._append(rank, buffer)
        self.tick()

    def tick(self) -> None:
        """Append the buffered entries if the oldest has waited
        ``flush_s`` (called for every listed input, added or not)."""
        if time.monotonic() - self._flushed >= self.flush_s:
            self.flush()

    def flush(self) -> None:
        """Append every buffered entry."""
        for rank, buffer in enumerate(self._buffers):
            if buffer:
                self._append(rank, buffer)
        self._flushed = time.monotonic()

    def _append(self, rank: int, buffer: List[str]) -> None:
        with open(self.paths[rank], 'a', encoding='utf-8') as f:
            f.write('\n'.join(buffer) + '\n')
        buffer.clear()

    def end(self, skipped: List[int]) -> None:
        """Close every shard: its last entries, then the number of its
        inputs an earlier run finished."""
        self.flush()
        for rank, path in enumerate(self.paths):
            with open(path, 'a', encoding='utf-8') as f:
                f.write(json.dumps(dict(end=True, skipped=skipped[rank])) +
                        '\n')

    def fail(self, message: str) -> None:
        """End every shard with rank 0's listing error."""
        for buffer in self._buffers:
            buffer.clear()
        for path in self.paths:
            with open(path, 'a', encoding='utf-8') as f:
                f.write(json.dumps(dict(error=message)) + '\n')


def read_shard(path: str,
               make_item: Callable[[str, str, str], object],
               on_end: Callable[[int], None],
               keep_waiting: Callable[[], bool],
               poll_s: float = 0.5,
               settle_s: float = 60.0) -> Iterator[object]:
    """The inputs of one shard file, as rank 0 appends them.

    Only whole lines are taken; a line that does not parse yet (another
    node's append seen half-way on a network file system) is read again
    until it does, for ``settle_s`` seconds at most.

    Args:
        path: The shard file.
        make_item: Builds an input from ``(name, path, kind)``.
        on_end: Called with the number of this shard's inputs that an
            earlier run finished, when the shard's end line is read.
        keep_waiting: Called while no new entry has come; False stops the
            reading (SIGTERM); it raises when rank 0 is lost.
        poll_s: Longest wait between two reads of a file that has not
            grown.
        settle_s: Longest time a line may stay unparseable.

    Yields:
        The inputs, in the order rank 0 listed them.

    Raises:
        ListingFailed: Rank 0 could not list the inputs, or the file holds
            a line that is not an entry.
    """
    offset, wait, bad_since = 0, 0.02, None
    while True:
        try:
            with open(path, 'rb') as f:  # re-opened: see the module's doc
                f.seek(offset)
                data = f.read(1 << 20)
        except FileNotFoundError:
            data = b''
        taken = 0
        for line in data.split(b'\n')[:-1]:  # whole lines only
            try:
                entry = json.loads(line)
            except ValueError:
                now = time.monotonic()
                bad_since = bad_since or now
                if now - bad_since > settle_s:
                    raise ListingFailed(
                        f'{path}: byte {offset + taken} is not an entry of '
                        'the listing; run the command again.') from None
                break
            bad_since = None
            taken += len(line) + 1
            if isinstance(entry, list):
                yield make_item(*entry)
            elif 'error' in entry:
                raise ListingFailed(entry['error'])
            else:
                on_end(int(entry['skipped']))
                return
        offset += taken
        if taken:
            wait = 0.02
            continue
        if not keep_waiting():
            return
        time.sleep(wait)
        wait = min(2 * wait, poll_s)


def remove_shard_files(out_dir: str, run_id: Optional[str] = None
                       ) -> None:
    """Delete the shard files of run ``run_id`` (of every run: None)."""
    folder = osp.join(out_dir, MANIFEST_DIR)
    if not osp.isdir(folder):
        return
    for name in os.listdir(folder):
        m = SHARD_FILE.match(name)
        if m and (run_id is None or m['run'] == run_id):
            os.remove(osp.join(folder, name))
