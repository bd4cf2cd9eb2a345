"""A sharded, resumable run over a stream of inputs on ``torch.distributed``.

Each process (rank) of a job launched by ``torchrun`` (``--launcher
pytorch``) or SLURM ``srun`` (``--launcher slurm``), or a single plain
process, processes the inputs whose name hashes to it (``name_hash(name) %
world_size == rank``): a fixed split that does not depend on timing or on
the order of the listing. Rank 0 alone walks the listing (a folder, a list
file, a glob) and reads what earlier runs of the same output folder
finished; it hands every other input to its rank through a shard file
(:mod:`.listing`). Each rank processes its inputs in batches and records
each in its manifest. When every rank is done, rank 0 merges the manifests
and writes ``summary.json``.

The process group is used to agree on the run (its id, the options check);
the rest goes through files in the output folder (which must be shared by
the nodes): the shard files, the manifests, and each rank's progress file,
rewritten every few seconds by a heartbeat thread. Ranks that finish early
wait in no collective call (no NCCL time-out however slow a straggler), and
a lost rank is noticed by its silence:

* an input that fails (unreadable, missing, an error in the models) is
  recorded ``"failed"`` and the run goes on; a re-run retries it;
* a rank that dies (SIGKILL, a node lost) loses at most its in-flight batch
  and the outputs of the last second not yet committed: everything
  committed stays, and outputs are written atomically so no output is ever
  half-written. Rank 0's end-of-run wait counts a rank whose progress file
  has not changed for ``rank_timeout`` seconds as lost, and stops with
  :class:`RanksLost`, naming the rank and its in-flight inputs; ranks that
  wait for rank 0's listing do the same for rank 0. A re-run resumes and
  removes the temporary files the lost ranks left;
* SIGTERM (SLURM pre-emption, ``scancel``, the end of ``--time``) makes
  each rank finish its current image batch (or abandon the video in
  flight), commit its manifest and stop; the command then exits with
  :data:`REQUEUE_EXIT_CODE` so that the job is requeued and resumes.
"""
import json
import os
import os.path as osp
import posixpath
import re
import secrets
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import (Callable, Dict, Iterable, Iterator, List, Optional,
                    Protocol, Sequence, Tuple)

import torch
from mmengine.dist import broadcast_object_list, get_dist_info
from mmengine.logging import print_log

from sapiens_mm.engine.fileio import atomic_write, remove_stale_temp_files
from sapiens_mm.engine.runner_cfg import init_cpu_distributed
from sapiens_mm.utils.sharded_names import LAUNCHERS, resolve_rank_timeout

from .listing import (ListedItem, ListingFailed, ShardWriter, read_shard,
                      remove_shard_files, shard_path)
from .manifest import (
    MANIFEST_DIR,
    MERGED_NAME,
    RUN_NAME,
    SUMMARY_NAME,
    DoneIndex,
    ManifestWriter,
    is_name_inside,
    manifest_files,
    merge_manifests,
    name_hash,
    progress_path,
    rank_manifest_path,
    read_json,
    read_progress,
    read_rank_progress,
)

__all__ = [
    'REQUEUE_EXIT_CODE', 'LAUNCHERS', 'RunStopped', 'RanksLost', 'Item',
    'Outcome', 'init_distributed', 'local_device', 'ShardedRun',
    'summary_lines', 'progress_line', 'unfinished_ranks', 'remove_leftovers'
]

#: Exit code of a run stopped by SIGTERM after flushing its manifests
#: (``EX_TEMPFAIL``: try again): re-running the same command resumes it.
REQUEUE_EXIT_CODE = 75
#: In-flight inputs a message names before "(+N more)".
_NAMED_INPUTS = 8


class RunStopped(Exception):
    """SIGTERM stopped the run after flushing this rank's manifest: exit
    with :data:`REQUEUE_EXIT_CODE`; running the same command again
    resumes."""


class RanksLost(RuntimeError):
    """Ranks stopped before finishing their share (killed, crashed, their
    node lost): the message names each, why it counts as lost and the
    inputs it was processing. What they recorded is kept; re-running the
    same command resumes.

    Attributes:
        ranks: The lost ranks.
    """

    def __init__(self, message: str, ranks: Sequence[int]) -> None:
        super().__init__(message)
        self.ranks = list(ranks)


class Item(Protocol):
    """What a sharded run needs of an input (e.g. a
    :class:`~sapiens_mm.apis.inferencers.utils.sources.Source`)."""
    name: str  #: unique output name: the key of the shard and manifests
    path: str  #: the file
    kind: str  #: ``'image'`` (batched) or ``'video'`` (alone)


@dataclass
class Outcome:
    """What processing one input gave.

    Attributes:
        status: ``'ok'``, ``'failed'``, or ``'abandoned'`` (stopped by
            SIGTERM before the end: not recorded, redone on resume).
        outputs: The files written (paths inside the output folder).
        error: Why it failed.
        frames: Images / video frames processed.
        extra: More fields for the manifest record (JSON-serialisable).
    """
    status: str
    outputs: Sequence[str] = ()
    error: Optional[str] = None
    frames: int = 0
    extra: dict = field(default_factory=dict)


def init_distributed(launcher: str,
                     timeout_s: int = 1800) -> Tuple[int, int]:
    """Join the job's process group, as training does: ``nccl`` through
    mmengine's ``init_dist`` with CUDA, ``gloo`` without
    (:func:`sapiens_mm.engine.runner_cfg.init_cpu_distributed`); rank and
    world size from ``torchrun`` (``pytorch``) or SLURM (``slurm``).

    Args:
        launcher: ``'none'`` (one process), ``'pytorch'`` or ``'slurm'``.
        timeout_s: Time-out of the collective calls (the start of the run).

    Returns:
        ``(rank, world_size)``.
    """
    if launcher not in LAUNCHERS:
        raise ValueError(f'Unknown launcher {launcher!r}; use '
                         f'{", ".join(LAUNCHERS)}.')
    if launcher == 'none':
        return 0, 1
    import torch.distributed as dist
    if not dist.is_initialized():
        if torch.cuda.is_available():
            from mmengine.dist import init_dist
            init_dist(launcher, backend='nccl', timeout=timeout_s)
        else:
            init_cpu_distributed(
                dict(launcher=launcher,
                     env_cfg=dict(dist_cfg=dict(backend='gloo',
                                                timeout=timeout_s))))
    return get_dist_info()


def local_device() -> str:
    """This process's device: ``cuda:<LOCAL_RANK>`` with CUDA (one process
    per GPU), else ``cpu``."""
    if not torch.cuda.is_available():
        return 'cpu'
    local = os.environ.get('LOCAL_RANK', os.environ.get('SLURM_LOCALID', 0))
    return f'cuda:{int(local)}'


@dataclass
class _Counters:
    ok: int = 0
    failed: int = 0
    skipped: int = 0
    frames: int = 0
    seconds: float = 0.0


class _Silence:
    """How long each rank's progress file has stayed the same, on this
    process's clock (the nodes' clocks need not agree): a rank's heartbeat
    changes its file every few seconds while the process lives."""

    def __init__(self) -> None:
        self._seen: Dict[int, Tuple[object, float]] = {}

    def __call__(self, rank: int, progress: Optional[dict],
                 now: float) -> float:
        key = None if progress is None else (progress.get('pid'),
                                             progress.get('beat'))
        old = self._seen.get(rank)
        if old is None or old[0] != key:
            self._seen[rank] = (key, now)
            return 0.0
        return now - old[1]


class ShardedRun:
    """One rank's part of a sharded run over ``out_dir``.

    Args:
        out_dir: The output folder (manifests in ``manifests/``); shared by
            the nodes of a multi-node job.
        options: What decides the outputs (models, tasks, output options):
            stored in ``manifests/run.json``; resuming with other options is
            refused (they would mix two kinds of outputs) unless
            ``overwrite``.
        rank: This process's rank (:func:`init_distributed`).
        world_size: Number of processes.
        overwrite: Redo every input (earlier manifests of ``out_dir`` are
            deleted, outputs overwritten).
        progress_interval: Seconds between rank 0's progress lines (0: no
            progress lines).
        what: What an input is, for the log lines (``'images'``).
        rank_timeout: Seconds without a heartbeat after which a rank counts
            as lost (None: :func:`~sapiens_mm.utils.sharded_names.
            default_rank_timeout`, 600 unless ``SAPIENS_MM_RANK_TIMEOUT`` is
            set). It measures silence, not work: a live rank beats every
            ``rank_timeout / 5`` seconds (at most 10), however large its
            share.
        require_outputs: Every input writes files (inference): an ``ok``
            record without outputs is not trusted on resume (curation
            records none).

    Use :meth:`start`, :meth:`run`, then :meth:`finish`.

    Raises:
        ValueError: ``rank_timeout`` is not a positive number.
    """

    def __init__(self,
                 out_dir: str,
                 options: dict,
                 rank: int = 0,
                 world_size: int = 1,
                 overwrite: bool = False,
                 progress_interval: float = 30.0,
                 what: str = 'inputs',
                 rank_timeout: Optional[float] = None,
                 require_outputs: bool = True) -> None:
        self.out_dir = out_dir
        # as stored in run.json (tuples become lists), for the comparison
        self.options = json.loads(json.dumps(options))
        self.rank, self.world_size = rank, world_size
        self.overwrite = overwrite
        self.progress_interval = progress_interval
        self.what = what
        self.rank_timeout = resolve_rank_timeout(rank_timeout, 'rank_timeout')
        self.heartbeat_s = min(10.0, self.rank_timeout / 5)
        self.require_outputs = require_outputs
        self.run_id: Optional[str] = None
        self.stop_requested = False
        self.counters = _Counters()
        self._in_flight: List[Item] = []
        self._last: Optional[str] = None
        self._error: Optional[str] = None
        self._progress_written = 0.0
        self._beat = 0
        self._lock = threading.Lock()
        self._heartbeat: Optional[threading.Thread] = None
        self._heartbeat_stop = threading.Event()
        self._lister: Optional[_Lister] = None
        self._rank0_silence = _Silence()
        self._rank0_checked = 0.0
        self._rank0_lost: Optional[str] = None
        self._previous_sigterm = None
        self._sigterm_installed = False
        self._started = time.monotonic()

    # ------------------------------------------------------------ start
    def start(self) -> None:
        """Agree on the run: rank 0 checks ``out_dir``'s options against an
        earlier run's (or deletes the earlier manifests with
        ``overwrite``), removes what the lost ranks of an earlier run left
        half-written and picks the run id; with several processes, every
        rank then starts its heartbeat.

        Raises:
            ValueError: ``out_dir`` holds a run with other options.
        """
        state = [None, None]
        if self.rank == 0:
            try:
                state[0] = self._prepare_out_dir()
            except (ValueError, OSError) as e:
                state[1] = str(e)
        broadcast_object_list(state, src=0)
        if state[1]:
            raise ValueError(state[1])
        self.run_id = state[0]
        # From now on SIGTERM stops the run cleanly (see finish()).
        if threading.current_thread() is threading.main_thread():
            self._previous_sigterm = signal.signal(signal.SIGTERM,
                                                   self._on_sigterm)
            self._sigterm_installed = True
        self._write_progress(force=True)
        if self.world_size > 1:
            self._heartbeat = threading.Thread(
                target=self._beat_loop, name='sapiens-heartbeat',
                daemon=True)
            self._heartbeat.start()

    def _prepare_out_dir(self) -> str:
        folder = osp.join(self.out_dir, MANIFEST_DIR)
        os.makedirs(folder, exist_ok=True)
        run_file = osp.join(folder, RUN_NAME)
        old = read_json(run_file)
        if self.overwrite:
            for path in manifest_files(self.out_dir):
                os.remove(path)  # our own records, about to be redone
        elif old is not None and old.get('options') != self.options:
            changed = sorted(
                k for k in set(old.get('options', {})) | set(self.options)
                if old.get('options', {}).get(k) != self.options.get(k))
            raise ValueError(
                f'{self.out_dir} holds a run with other options (they '
                f'differ in: {", ".join(changed)}); use --overwrite to '
                'redo everything with the new options, or another '
                '--out-dir.')
        remove_leftovers(self.out_dir, read_progress(self.out_dir))
        for name in os.listdir(folder):  # counters of the earlier run
            if name.startswith('progress.rank'):
                os.remove(osp.join(folder, name))
        remove_shard_files(self.out_dir)
        atomic_write(
            json.dumps(dict(options=self.options), indent=1),
            run_file)
        return time.strftime('%Y%m%dT%H%M%S') + '-' + secrets.token_hex(3)

    def _beat_loop(self) -> None:
        while not self._heartbeat_stop.wait(self.heartbeat_s):
            try:
                self._write_progress(force=True)
            except OSError as e:  # a full disk...: the silence tells rank 0
                print_log(f'Rank {self.rank}: cannot write its heartbeat '
                          f'({e}).', logger='current', level=30)

    def _stop_threads(self) -> None:
        self._heartbeat_stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
            self._heartbeat = None
        if self._lister is not None:
            self._lister.stop()

    # ------------------------------------------------------------ loop
    def rank_of(self, h: int) -> int:
        """The rank that processes the input whose name hashes to ``h``
        (:func:`name_hash`)."""
        return h % self.world_size

    def mine(self, name: str) -> bool:
        """Whether the input named ``name`` belongs to this rank."""
        return self.rank_of(name_hash(name)) == self.rank

    def run(self,
            items: Iterable[Item],
            process: Callable[[List[Item]], List[Outcome]],
            batch_size: int = 1,
            make_item: Optional[Callable[[str, str, str], Item]] = None
            ) -> None:
        """Process this rank's share of ``items``.

        Args:
            items: Every input of the run, in a fixed order; iterated by
                rank 0 alone (give a lazy iterable: the other ranks never
                touch it).
            process: Processes a batch of items (images up to
                ``batch_size``, a video alone) and returns one
                :class:`Outcome` per item; it should return failures, not
                raise (an exception stops this rank, naming the batch). It
                may poll :attr:`stop_requested` to abandon a long video.
            batch_size: Images per call of ``process``.
            make_item: Builds an item from ``(name, path, kind)`` as a
                shard file holds it, for the ranks that read one (several
                processes); default: :class:`~.listing.ListedItem`.

        Raises:
            RanksLost: Rank 0 was lost while this rank waited for its
                inputs.
            ListingFailed: Rank 0 could not list the inputs (on rank 0: its
                own error, e.g. ``FileNotFoundError``).
        """
        writer = ManifestWriter(
            rank_manifest_path(self.out_dir, self.run_id, self.rank))
        reporter = _Reporter(self) if (
            self.rank == 0 and self.progress_interval > 0) else None
        self._started = time.monotonic()
        if self.rank == 0:
            self._lister = _Lister(self, items)
        batch: List[Item] = []
        try:
            for item in self._inputs(make_item or ListedItem):
                if self.stop_requested:
                    break
                if not osp.isfile(item.path):
                    self._record(writer, item,
                                 Outcome('failed', error='file not found'),
                                 0.0, flush=False)
                    self._write_progress()
                    continue
                if item.kind == 'video':
                    self._process(writer, process, batch)
                    self._process(writer, process, [item])
                    batch = []
                    continue
                batch.append(item)
                if len(batch) >= batch_size:
                    self._process(writer, process, batch)
                    batch = []
            if not self.stop_requested:
                self._process(writer, process, batch)
        except BaseException as e:
            self._restore_sigterm()
            self._stop_threads()
            self._error = str(e) or type(e).__name__
            raise
        finally:
            writer.close()
            self.counters.seconds = time.monotonic() - self._started
            self._write_progress(force=True)
            if reporter is not None:
                reporter.stop()

    def _inputs(self, make_item: Callable[[str, str, str], Item]
                ) -> Iterator[Item]:
        """This rank's inputs: from the listing itself in a single
        process, else from its shard file (rank 0 lists in a thread)."""
        if self.world_size == 1:
            for _, item in self._lister.entries():
                if item is None:
                    self.counters.skipped += 1
                else:
                    yield item
            return
        if self.rank == 0:
            self._lister.start_thread()
        try:
            yield from read_shard(
                shard_path(self.out_dir, self.run_id, self.rank), make_item,
                self._end_of_shard, self._keep_waiting)
        except ListingFailed:
            if self._lister is not None and self._lister.error is not None:
                raise self._lister.error from None  # rank 0: the original
            raise

    def _end_of_shard(self, skipped: int) -> None:
        self.counters.skipped += skipped

    def _keep_waiting(self) -> bool:
        """While this rank waits for inputs: False when SIGTERM came;
        raises when the lister (rank 0) is lost."""
        if self.stop_requested:
            return False
        if self.rank == 0:
            return self._lister.alive()
        now = time.monotonic()
        if now - self._rank0_checked < 1.0:
            return True
        self._rank0_checked = now
        p = read_rank_progress(self.out_dir, 0)
        if p is not None and p['run_id'] != self.run_id:
            p = None
        why = _lost_reason(p, self._rank0_silence(0, p, now),
                           self.rank_timeout)
        if why is None:
            return True
        if self._rank0_lost is None:  # one more read: its last lines
            self._rank0_lost = why
            self._rank0_checked = 0.0
            return True
        raise RanksLost(
            f'Rank {self.rank} waited for its inputs from rank 0, which '
            f'lists them: {describe_rank(0, p, why)}. Run the same command '
            'again to resume.', [0])

    def _on_sigterm(self, signum, frame) -> None:
        self.stop_requested = True

    def _restore_sigterm(self) -> None:
        if self._sigterm_installed:
            signal.signal(signal.SIGTERM,
                          self._previous_sigterm or signal.SIG_DFL)
            self._sigterm_installed = False

    def _process(self, writer: ManifestWriter, process, batch: List[Item]
                 ) -> None:
        if not batch or self.stop_requested:
            return  # not recorded: redone by the next run
        self._in_flight = list(batch)
        self._write_progress(force=True)
        t0 = time.monotonic()
        try:
            outcomes = process(batch)
        except Exception as e:
            print_log(f'Rank {self.rank} stopped by an error on '
                      f'{", ".join(i.path for i in batch)}: {e}',
                      logger='current', level=40)
            raise
        seconds = (time.monotonic() - t0) / len(batch)
        for item, outcome in zip(batch, outcomes):
            if outcome.status != 'abandoned':
                self._record(writer, item, outcome, seconds)
        self._in_flight = []
        if self.stop_requested:
            print_log(f'Rank {self.rank}: SIGTERM, stopping after the current '
                      'batch; run the same command again to resume.',
                      logger='current', level=30)

    def _record(self, writer: ManifestWriter, item: Item, outcome: Outcome,
                seconds: float, flush: bool = True) -> None:
        outputs = []
        for path in dict.fromkeys(outcome.outputs):  # once each, in order
            rel = osp.relpath(path, self.out_dir)
            outputs.append(rel.replace(os.sep, '/'))
        writer.write(dict(
            input=item.path, name=item.name, kind=item.kind,
            status=outcome.status, outputs=outputs, error=outcome.error,
            frames=outcome.frames, seconds=round(seconds, 4),
            rank=self.rank, **outcome.extra), flush=flush)
        if outcome.status == 'ok':
            self.counters.ok += 1
        else:
            self.counters.failed += 1
        self.counters.frames += outcome.frames
        self._last = item.path

    def _write_progress(self, force: bool = False,
                        finished: bool = False) -> None:
        """Rewrite this rank's progress file (at most every 2 s unless
        ``force``). Each write is a heartbeat; none is ``fsync``\\ ed (a
        progress file is rewritten, not kept)."""
        with self._lock:
            now = time.monotonic()
            if not force and now - self._progress_written < 2.0:
                return
            self._progress_written = now
            self._beat += 1
            c = self.counters
            in_flight = self._in_flight
            progress = dict(
                run_id=self.run_id, rank=self.rank,
                world_size=self.world_size, pid=os.getpid(),
                host=os.uname().nodename, beat=self._beat,
                heartbeat_s=self.heartbeat_s, ok=c.ok, failed=c.failed,
                skipped=c.skipped, frames=c.frames,
                seconds=round(now - self._started, 3),
                in_flight=[i.path for i in in_flight],
                in_flight_names=[i.name for i in in_flight],
                last=self._last, stopped=self.stop_requested,
                error=self._error,
                finished=finished)
            if self._lister is not None:
                progress['listing'] = self._lister.state()
            atomic_write(json.dumps(progress),
                         progress_path(self.out_dir, self.rank),
                         durable=False)

    # ------------------------------------------------------------ end
    def finish(self, poll_s: float = 1.0) -> Optional[dict]:
        """End this rank's part. Rank 0 waits for every rank's final
        numbers, merges the manifests and writes ``summary.json``.

        Rank 0's wait logs which ranks it waits for, then one line every
        ``progress_interval`` seconds; a rank whose progress file has not
        changed for ``rank_timeout`` seconds (no heartbeat), or that
        stopped on an error or SIGTERM, counts as lost.

        Returns:
            The summary on rank 0; None on the other ranks.

        Raises:
            RunStopped: SIGTERM stopped the run (exit with
                :data:`REQUEUE_EXIT_CODE`).
            RanksLost: Ranks stopped before finishing (rank 0; raised once
                every rank has finished or is lost).
        """
        self._stop_threads()
        if self.rank != 0 or self.stop_requested:
            self._restore_sigterm()
        if self.stop_requested:
            raise RunStopped(f'rank {self.rank} stopped by SIGTERM')
        self.counters.seconds = time.monotonic() - self._started
        self._write_progress(force=True, finished=True)
        if self.rank != 0:
            return None
        try:
            ranks = self._wait_for_ranks(poll_s)
        finally:
            self._restore_sigterm()
        if ranks is None:
            raise RunStopped(f'rank {self.rank} stopped by SIGTERM')
        remove_shard_files(self.out_dir, self.run_id)
        counts = merge_manifests(self.out_dir)
        summary = self._summary(ranks, counts)
        atomic_write(json.dumps(summary, indent=1),
                     osp.join(self.out_dir, SUMMARY_NAME))
        for line in summary_lines(summary):
            print_log(line, logger='current')
        return summary

    def _wait_for_ranks(self, poll_s: float) -> Optional[Dict[int, dict]]:
        silence = _Silence()
        said = None
        while True:
            progress = {r: p for r, p in read_progress(self.out_dir)
                        if p['run_id'] == self.run_id}
            ranks = {r: p for r, p in progress.items() if p['finished']}
            if len(ranks) == self.world_size:
                return ranks
            if self.stop_requested:
                return None
            now = time.monotonic()
            waiting = [r for r in range(self.world_size) if r not in ranks]
            quiet = {r: silence(r, progress.get(r), now) for r in waiting}
            lost = {}
            for r in waiting:
                why = _lost_reason(progress.get(r), quiet[r],
                                   self.rank_timeout)
                if why is not None:
                    lost[r] = why
            if len(lost) == len(waiting):
                raise RanksLost(_lost_message(lost, progress), list(lost))
            if said is None or (self.progress_interval > 0 and
                                now - said >= self.progress_interval):
                print_log(self._waiting_line(waiting, progress, quiet,
                                             said is None),
                          logger='current')
                said = now
            time.sleep(poll_s)

    def _waiting_line(self, waiting: List[int], progress: Dict[int, dict],
                      quiet: Dict[int, float], first: bool) -> str:
        """What rank 0 waits for: per rank its count of done inputs and
        (``quiet``: seconds without news) a silence of two heartbeats."""
        parts = []
        for r in waiting:
            p = progress.get(r)
            if p is None:
                parts.append(f'rank {r}: no progress file yet')
            else:
                parts.append(f'rank {r}: {p["ok"] + p["failed"]} done'
                             + (f', silent for {quiet[r]:.0f} s'
                                if quiet[r] >= 2 * p.get('heartbeat_s', 10)
                                else ''))
        text = f'Rank 0 waits for {len(waiting)} rank(s): ' + '; '.join(
            parts)
        if first:
            text += (f' (a rank without a heartbeat for '
                     f'{self.rank_timeout:g} s counts as lost: '
                     '--rank-timeout)')
        return text

    def _summary(self, ranks: Dict[int, dict], counts: Dict[str, int]
                 ) -> dict:
        per_rank = []
        for r in sorted(ranks):
            p = ranks[r]
            per_rank.append(dict(
                rank=r, host=p.get('host'), processed=p['ok'],
                failed=p['failed'], skipped=p['skipped'],
                frames=p['frames'], seconds=p['seconds'],
                images_per_s=round(p['frames'] / p['seconds'], 3)
                if p['seconds'] > 0 else None))
        frames = sum(p['frames'] for p in per_rank)
        wall = max((p['seconds'] for p in per_rank), default=0.0)
        return dict(
            what=self.what, run_id=self.run_id, world_size=self.world_size,
            processed=sum(p['processed'] for p in per_rank),
            failed=sum(p['failed'] for p in per_rank),
            skipped=sum(p['skipped'] for p in per_rank),
            frames=frames, seconds=wall,
            images_per_s=round(frames / wall, 3) if wall > 0 else None,
            manifest=dict(path=MERGED_NAME, **counts), ranks=per_rank)


class _Lister:
    """Rank 0's one walk of the input listing (see :mod:`.listing`): each
    input's rank, the inputs an earlier run finished left out (counted per
    rank), the others handed out; in a thread that writes the shard files
    when there are several ranks."""

    def __init__(self, run: ShardedRun, items: Iterable[Item]) -> None:
        self.run, self.items = run, items
        self.listed = 0
        self.skipped = [0] * run.world_size
        self.done = False
        self.error: Optional[BaseException] = None
        self._thread: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self._dead_seen = False

    def state(self) -> dict:
        """What the progress file says of the listing."""
        return dict(listed=self.listed, skipped=sum(self.skipped),
                    done=self.done)

    def entries(self) -> Iterator[Tuple[int, Optional[Item]]]:
        """``(rank, item)`` of every input, ``(rank, None)`` for one an
        earlier run finished."""
        run = self.run
        done = None if run.overwrite else DoneIndex(
            run.out_dir, require_outputs=run.require_outputs)
        for item in self.items:
            if self._stop.is_set():
                return
            h = name_hash(item.name)
            r = run.rank_of(h)
            self.listed += 1
            if done is not None and h in done:
                self.skipped[r] += 1
                yield r, None
            else:
                yield r, item
        self.done = True

    def start_thread(self) -> None:
        self._thread = threading.Thread(target=self._write_shards,
                                        name='sapiens-listing', daemon=True)
        self._thread.start()

    def _write_shards(self) -> None:
        run, writer = self.run, None
        try:
            writer = ShardWriter(run.out_dir, run.run_id, run.world_size)
            for r, item in self.entries():
                if item is None:
                    writer.tick()
                else:
                    writer.add(r, item)
            if not self._stop.is_set():
                writer.end(self.skipped)
        except BaseException as e:  # noqa: BLE001 (handed to every rank)
            self.error = e
            if writer is not None:
                try:
                    writer.fail('rank 0 could not list the inputs: '
                                f'{str(e) or type(e).__name__}')
                except OSError:
                    pass  # the readers see the silence

    def alive(self) -> bool:
        """Whether the shard files may still grow: True while the thread
        runs, and once more after it ended (a last read)."""
        if self._thread is not None and self._thread.is_alive():
            return True
        if not self._dead_seen:
            self._dead_seen = True
            return True
        raise ListingFailed(f'the input listing stopped: {self.error}')

    def stop(self) -> None:
        self._stop.set()


def _lost_reason(progress: Optional[dict], quiet: float,
                 rank_timeout: float) -> Optional[str]:
    """Why a rank whose progress is ``progress`` (None: no file yet) and
    that has been silent for ``quiet`` seconds counts as lost, or None
    while it does not: it ended with an error or on SIGTERM before
    finishing, or it sent no heartbeat for ``rank_timeout`` seconds."""
    if progress is not None and not progress['finished'] and (
            progress.get('error') or progress.get('stopped')):
        return _why_stopped(progress)
    if quiet >= rank_timeout:
        return (f'no heartbeat for {quiet:.0f} s (--rank-timeout '
                f'{rank_timeout:g})')
    return None


def _why_stopped(progress: dict) -> str:
    """Why a rank that ended without finishing ended, from its progress."""
    if progress.get('stopped'):
        return 'stopped by SIGTERM'
    if progress.get('error'):
        return f'failed: {progress["error"]}'
    return 'did not finish (killed or crashed)'


def describe_rank(rank: int, progress: Optional[dict], why: str) -> str:
    """``rank r (pid P on HOST) WHY while processing A, B; n ok, m failed
    recorded``: one rank of a run that did not finish, from its last
    progress (None: it never wrote one)."""
    if progress is None:
        return f'rank {rank} {why}, before writing its progress'
    names = progress.get('in_flight') or []
    if names:
        shown = ', '.join(str(n) for n in names[:_NAMED_INPUTS])
        more = len(names) - _NAMED_INPUTS
        where = f'while processing {shown}' + (
            f' (+{more} more: tools/sharded_status.py lists them)'
            if more > 0 else '')
    elif progress.get('last'):
        where = f'after {progress["last"]}'
    else:
        where = 'before its first input'
    return (f'rank {rank} (pid {progress.get("pid")} on '
            f'{progress.get("host")}) {why} {where}; {progress["ok"]} ok, '
            f'{progress["failed"]} failed recorded')


def _lost_message(lost: Dict[int, str], progress: Dict[int, dict]) -> str:
    ranks = ', '.join(str(r) for r in lost)
    return (f'Rank(s) {ranks} stopped before finishing their share: ' +
            '; '.join(describe_rank(r, progress.get(r), why)
                      for r, why in lost.items()) +
            '. What they recorded is kept: run the same command again to '
            'resume.')


def summary_lines(summary: dict) -> List[str]:
    """The summary of a finished run as log lines."""
    what = summary['what']
    lines = [
        f'{summary["world_size"]} process(es): {summary["processed"]} '
        f'{what} processed, {summary["skipped"]} skipped (done by an '
        f'earlier run), {summary["failed"]} failed; {summary["frames"]} '
        f'images / frames in {summary["seconds"]:.1f} s = '
        f'{summary["images_per_s"] or 0:.2f} images/s'
    ]
    if summary['world_size'] > 1:
        lines += [
            f'  rank {p["rank"]} ({p["host"]}): {p["processed"]} processed, '
            f'{p["skipped"]} skipped, {p["failed"]} failed, '
            f'{p["images_per_s"] or 0:.2f} images/s' for p in summary['ranks']
        ]
    m = summary['manifest']
    lines.append(f'{m["path"]}: {m.get("ok", 0)} ok, {m.get("failed", 0)} '
                 'failed in all runs')
    return lines


class _Reporter:
    """Rank 0's periodic one-line summary of every rank's progress (read
    from their progress files; the total from rank 0's listing once it
    ended), and a last line when rank 0's share ends."""

    def __init__(self, run: ShardedRun) -> None:
        self.run = run
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _say(self) -> None:
        line = progress_line(self.run.out_dir, self.run.run_id)
        if line:
            print_log(line, logger='current')

    def _loop(self) -> None:
        while not self._stop.wait(self.run.progress_interval):
            self._say()

    def stop(self) -> None:
        """Stop the periodic lines and say where the run stands once more
        (so that even a run shorter than the interval logs a summary)."""
        self._stop.set()
        self._thread.join(timeout=5)
        self._say()


def progress_line(out_dir: str, run_id: Optional[str]) -> Optional[str]:
    """One line over every rank's progress file of run ``run_id``: done /
    total, rate and ETA (the total: the number of inputs rank 0 listed,
    once its listing ended)."""
    ranks = [p for _, p in read_progress(out_dir) if p['run_id'] == run_id]
    if not ranks:
        return None
    done = sum(p['ok'] + p['failed'] for p in ranks)
    listing = next((p['listing'] for p in ranks if p['rank'] == 0
                    and isinstance(p.get('listing'), dict)), None)
    total = None
    if listing is not None:
        skipped = int(listing.get('skipped', 0))
        if listing.get('done'):
            total = int(listing.get('listed', 0))
    else:
        skipped = sum(p['skipped'] for p in ranks)
    seconds = max(p['seconds'] for p in ranks) or 1e-9
    rate = done / seconds
    text = f'progress: {done + skipped}'
    if total:
        left = max(total - done - skipped, 0)
        eta = left / rate if rate > 0 else float('inf')
        text += (f' / {total} ({100 * (done + skipped) / total:.1f} %), ETA '
                 f'{_duration(eta)}')
    elif listing is not None:
        text += f' of {listing.get("listed", 0)} listed so far'
    failed = sum(p['failed'] for p in ranks)
    return (f'{text}; {rate:.2f} inputs/s over {len(ranks)} rank(s); '
            f'{skipped} skipped (done earlier), {failed} failed')


def _duration(seconds: float) -> str:
    if seconds == float('inf'):
        return '?'
    seconds = int(seconds)
    return f'{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}'


def unfinished_ranks(out_dir: str) -> List[str]:
    """One line per rank of the latest run of ``out_dir`` that did not
    finish: its rank, process, and the inputs it was processing (or the
    last it recorded)."""
    progress = read_progress(out_dir)
    if not progress:
        return []
    run_id = max(p['run_id'] for _, p in progress)
    return [describe_rank(rank, p, _why_stopped(p)) for rank, p in progress
            if p['run_id'] == run_id and not p['finished']]


#: A video's private temporary folder (``VideoWriters.temporary_path``:
#: ``mkdtemp(prefix='.<stem>.tmp')``).
_VIDEO_TMP = re.compile(r'^\.(?P<stem>.+)\.tmp[a-z0-9_]{8}$')


def remove_leftovers(out_dir: str, progress: List[Tuple[int, dict]]
                     ) -> List[str]:
    """Delete what the ranks of an earlier run that did not finish left
    half-written: the temporary files of atomic writes
    (:func:`~sapiens_mm.engine.fileio.remove_stale_temp_files`: only
    ``.<name>.tmp<pid>_<hex>`` files of processes that are gone) and the
    temporary folders of videos, in the folders of their in-flight inputs'
    outputs (``<task>/<dir of name>/`` and ``<task>/<name>/``, for each
    task folder of ``out_dir``), in ``out_dir`` and in its manifest
    folder. Nothing else is listed: the rest of the outputs is not read.

    Args:
        out_dir: The output folder.
        progress: The earlier run's progress files (:func:`read_progress`).

    Returns:
        The removed paths (each logged).
    """
    names = {n for _, p in progress if not p['finished']
             for n in (p.get('in_flight_names') or []) if is_name_inside(n)}
    folders = {out_dir, osp.join(out_dir, MANIFEST_DIR)}
    videos: Dict[str, set] = {}
    if names:
        tops = [e.path for e in os.scandir(out_dir)
                if e.is_dir(follow_symlinks=False)
                and e.name != MANIFEST_DIR]
        for top in tops:
            for name in names:
                parent = osp.join(top, *posixpath.dirname(name).split('/'))
                folders.update((parent, osp.join(top, *name.split('/'))))
                videos.setdefault(parent, set()).add(
                    posixpath.basename(name))
    removed = []
    for folder in sorted(folders):
        removed += remove_stale_temp_files(folder)
    for folder, stems in sorted(videos.items()):
        removed += _remove_video_temporaries(folder, stems)
    return removed


def _remove_video_temporaries(folder: str, stems: set) -> List[str]:
    """The private temporary folders of the videos ``stems`` in
    ``folder`` (their files, then the folder)."""
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        m = _VIDEO_TMP.match(entry.name)
        if not (m and m['stem'] in stems
                and entry.is_dir(follow_symlinks=False)):
            continue
        try:
            for f in os.scandir(entry.path):
                if f.is_file(follow_symlinks=False):
                    os.remove(f.path)
            os.rmdir(entry.path)
        except OSError:
            continue
        removed.append(entry.path)
        print_log(f'Removed {entry.path}, the unfinished video of a rank '
                  'that was lost.', logger='current', level=30)
    return removed
