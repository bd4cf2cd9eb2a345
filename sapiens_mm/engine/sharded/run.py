"""A sharded, resumable run over a stream of inputs on ``torch.distributed``.

Each process (rank) of a job launched by ``torchrun`` (``--launcher
pytorch``) or SLURM ``srun`` (``--launcher slurm``), or a single plain
process, goes through the same stream of inputs (a folder walked lazily, a
list file, a glob) and takes the inputs whose name hashes to it
(``name_hash(name) % world_size == rank``): a fixed split that does not
depend on timing or on the order of the listing, and that needs no list in
memory. It skips the inputs an earlier run of the same output folder
finished (:class:`~.manifest.DoneIndex`), processes the others in batches,
and records each in its manifest. When every rank is done, rank 0 merges
the manifests and writes ``summary.json``.

The process group is used to agree on the run (its id, the options check);
the end is awaited through the ranks' progress files, so ranks that finish
early wait in no collective call (no time-out however slow a straggler)
and the run works the same on a shared file system across nodes.

Faults:

* an input that fails (unreadable, missing, an error in the models) is
  recorded ``"failed"`` and the run goes on; a re-run retries it;
* a rank that dies (SIGKILL, a node lost) loses at most its in-flight
  batch: everything recorded stays, and outputs are written atomically so
  no output is ever half-written; ``tools/dist_infer.sh`` then names the
  rank and its in-flight input (from its progress file);
* SIGTERM (SLURM pre-emption, ``scancel``, the end of ``--time``) makes
  each rank finish its current image batch (or abandon the video in
  flight), flush its manifest and stop; the command then exits with
  :data:`REQUEUE_EXIT_CODE` so that the job is requeued and resumes.
"""
import json
import os
import os.path as osp
import secrets
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Protocol, Sequence, Tuple

import torch
from mmengine.dist import broadcast_object_list, get_dist_info
from mmengine.logging import print_log

from sapiens_mm.engine.fileio import atomic_write
from sapiens_mm.engine.runner_cfg import init_cpu_distributed
from sapiens_mm.utils.sharded_names import LAUNCHERS

from .manifest import (
    MANIFEST_DIR,
    MERGED_NAME,
    RUN_NAME,
    SUMMARY_NAME,
    DoneIndex,
    ManifestWriter,
    manifest_files,
    merge_manifests,
    name_hash,
    progress_path,
    rank_manifest_path,
    read_json,
    read_progress,
)

__all__ = [
    'REQUEUE_EXIT_CODE', 'LAUNCHERS', 'RunStopped', 'Item', 'Outcome',
    'init_distributed',
    'local_device', 'ShardedRun', 'summary_lines', 'progress_line',
    'unfinished_ranks'
]

#: Exit code of a run stopped by SIGTERM after flushing its manifests
#: (``EX_TEMPFAIL``: try again): re-running the same command resumes it.
REQUEUE_EXIT_CODE = 75


class RunStopped(Exception):
    """SIGTERM stopped the run after flushing this rank's manifest: exit
    with :data:`REQUEUE_EXIT_CODE`; running the same command again
    resumes."""


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


class ShardedRun:
    """One rank's part of a sharded run over ``out_dir``.

    Args:
        out_dir: The output folder (manifests in ``manifests/``).
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

    Use :meth:`start`, :meth:`run`, then :meth:`finish`.
    """

    def __init__(self,
                 out_dir: str,
                 options: dict,
                 rank: int = 0,
                 world_size: int = 1,
                 overwrite: bool = False,
                 progress_interval: float = 30.0,
                 what: str = 'inputs') -> None:
        self.out_dir = out_dir
        # as stored in run.json (tuples become lists), for the comparison
        self.options = json.loads(json.dumps(options))
        self.rank, self.world_size = rank, world_size
        self.overwrite = overwrite
        self.progress_interval = progress_interval
        self.what = what
        self.run_id: Optional[str] = None
        self.stop_requested = False
        self.counters = _Counters()
        self._done: Optional[DoneIndex] = None
        self._in_flight: List[str] = []
        self._last: Optional[str] = None
        self._progress_written = 0.0
        self._previous_sigterm = None
        self._sigterm_installed = False
        self._started = time.monotonic()

    # ------------------------------------------------------------ start
    def start(self) -> None:
        """Agree on the run: rank 0 checks ``out_dir``'s options against an
        earlier run's (or deletes the earlier manifests with
        ``overwrite``) and picks the run id; every rank then reads what
        earlier runs finished in its shard.

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
        if not self.overwrite:
            rank, world = self.rank, self.world_size
            self._done = DoneIndex(self.out_dir,
                                   keep=lambda h: h % world == rank)
        self._write_progress(force=True)

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
        for name in os.listdir(folder):  # counters of the earlier run
            if name.startswith('progress.rank'):
                os.remove(osp.join(folder, name))
        atomic_write(
            json.dumps(dict(options=self.options), indent=1),
            run_file)
        return time.strftime('%Y%m%dT%H%M%S') + '-' + secrets.token_hex(3)

    # ------------------------------------------------------------ loop
    def mine(self, name: str) -> bool:
        """Whether the input named ``name`` belongs to this rank."""
        return name_hash(name) % self.world_size == self.rank

    def run(self,
            items: Iterable[Item],
            process: Callable[[List[Item]], List[Outcome]],
            batch_size: int = 1,
            count: Optional[Callable[[], int]] = None) -> None:
        """Process this rank's share of ``items``.

        Args:
            items: Every input of the run, in a fixed order (each rank
                streams them all and keeps its own).
            process: Processes a batch of items (images up to
                ``batch_size``, a video alone) and returns one
                :class:`Outcome` per item; it should return failures, not
                raise (an exception stops this rank, naming the batch). It
                may poll :attr:`stop_requested` to abandon a long video.
            batch_size: Images per call of ``process``.
            count: Counts all inputs (run on rank 0 in a background thread,
                for the ETA of the progress lines).
        """
        writer = ManifestWriter(
            rank_manifest_path(self.out_dir, self.run_id, self.rank))
        reporter = _Reporter(self, count) if (
            self.rank == 0 and self.progress_interval > 0) else None
        self._started = time.monotonic()
        batch: List[Item] = []
        try:
            for item in items:
                if self.stop_requested:
                    break
                h = name_hash(item.name)
                if h % self.world_size != self.rank:
                    continue
                if self._done and h in self._done:
                    self.counters.skipped += 1
                    continue
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
        except BaseException:
            self._restore_sigterm()
            raise
        finally:
            writer.close()
            self.counters.seconds = time.monotonic() - self._started
            self._write_progress(force=True)
            if reporter is not None:
                reporter.stop()

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
        self._in_flight = [item.path for item in batch]
        self._write_progress(force=True)
        t0 = time.monotonic()
        try:
            outcomes = process(batch)
        except Exception as e:
            print_log(f'Rank {self.rank} stopped by an error on '
                      f'{", ".join(self._in_flight)}: {e}', logger='current',
                      level=40)
            self._write_progress(force=True, error=str(e))
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

    def _write_progress(self, force: bool = False, finished: bool = False,
                        error: Optional[str] = None) -> None:
        now = time.monotonic()
        if not force and now - self._progress_written < 2.0:
            return
        self._progress_written = now
        c = self.counters
        atomic_write(
            json.dumps(
                dict(run_id=self.run_id, rank=self.rank,
                     world_size=self.world_size, pid=os.getpid(),
                     host=os.uname().nodename, ok=c.ok, failed=c.failed,
                     skipped=c.skipped, frames=c.frames,
                     seconds=round(now - self._started, 3),
                     in_flight=self._in_flight, last=self._last,
                     stopped=self.stop_requested, error=error,
                     finished=finished)),
            progress_path(self.out_dir, self.rank))

    # ------------------------------------------------------------ end
    def finish(self, poll_s: float = 1.0) -> Optional[dict]:
        """End this rank's part. Rank 0 waits for every rank's final
        numbers, merges the manifests and writes ``summary.json``.

        Returns:
            The summary on rank 0; None on the other ranks.

        Raises:
            RunStopped: SIGTERM stopped the run (exit with
                :data:`REQUEUE_EXIT_CODE`).
        """
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
        counts = merge_manifests(self.out_dir)
        summary = self._summary(ranks, counts)
        atomic_write(json.dumps(summary, indent=1),
                     osp.join(self.out_dir, SUMMARY_NAME))
        for line in summary_lines(summary):
            print_log(line, logger='current')
        return summary

    def _wait_for_ranks(self, poll_s: float) -> Optional[Dict[int, dict]]:
        while True:
            ranks = {r: p for r, p in read_progress(self.out_dir)
                     if p.get('run_id') == self.run_id and p.get('finished')}
            if len(ranks) == self.world_size:
                return ranks
            if self.stop_requested:
                return None
            time.sleep(poll_s)

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
    from their progress files), with the total counted in the
    background for the ETA, and a last line when rank 0's share ends."""

    def __init__(self, run: ShardedRun, count: Optional[Callable[[], int]]
                 ) -> None:
        self.run, self.total = run, None
        self._stop = threading.Event()
        if count is not None:
            threading.Thread(target=self._count, args=(count, ),
                             daemon=True).start()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _count(self, count: Callable[[], int]) -> None:
        try:
            self.total = count()
        except Exception:  # noqa: BLE001 (the ETA is optional)
            self.total = None

    def _say(self) -> None:
        line = progress_line(self.run.out_dir, self.run.run_id, self.total)
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


def progress_line(out_dir: str, run_id: Optional[str],
                  total: Optional[int]) -> Optional[str]:
    """One line over every rank's progress file of run ``run_id``: done /
    total, rate and ETA."""
    ranks = [p for _, p in read_progress(out_dir) if p.get('run_id') ==
             run_id]
    if not ranks:
        return None
    done = sum(p['ok'] + p['failed'] for p in ranks)
    skipped = sum(p['skipped'] for p in ranks)
    seconds = max(p['seconds'] for p in ranks) or 1e-9
    rate = done / seconds
    text = f'progress: {done + skipped}'
    if total:
        left = max(total - done - skipped, 0)
        eta = left / rate if rate > 0 else float('inf')
        text += (f' / {total} ({100 * (done + skipped) / total:.1f} %), ETA '
                 f'{_duration(eta)}')
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
    finish: its rank, process, and the input it was processing (or the
    last it recorded)."""
    progress = read_progress(out_dir)
    if not progress:
        return []
    run_id = max(p.get('run_id') or '' for _, p in progress)
    lines = []
    for rank, p in progress:
        if p.get('run_id') != run_id or p.get('finished'):
            continue
        if p.get('in_flight'):
            where = f'while processing {", ".join(p["in_flight"])}'
        elif p.get('last'):
            where = f'after {p["last"]}'
        else:
            where = 'before its first input'
        why = ('stopped by SIGTERM' if p.get('stopped') else
               f'failed: {p["error"]}' if p.get('error') else
               'did not finish (killed or crashed)')
        lines.append(f'rank {rank} (pid {p.get("pid")} on {p.get("host")}) '
                     f'{why} {where}; {p["ok"]} ok, {p["failed"]} failed '
                     'recorded')
    return lines
