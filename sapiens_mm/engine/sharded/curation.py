"""The person-image curation of :mod:`sapiens_mm.datasets.curation` as a
sharded run (:class:`~.run.ShardedRun`): split across the processes of a
``torchrun`` / SLURM job, resumable, with the same ``manifest.txt`` as a
single-process :func:`~sapiens_mm.datasets.curation.curate_images`."""
import os.path as osp
from typing import Callable, Iterator, Optional, Sequence

from sapiens_mm.datasets.curation import (MANIFEST_NAME, CurationReport,
                                          curation_settings, decide, is_kept,
                                          write_curation_outputs)
from sapiens_mm.utils.image_io import IMAGE_EXTENSIONS, walk_files

from .manifest import MERGED_NAME, iter_records
from .run import Outcome, ShardedRun

__all__ = ['curate_images_sharded']


class _Image:
    """An image of a sharded curation: its ``name`` is its path relative to
    the root (the key of the shards and manifests)."""
    kind = 'image'

    def __init__(self, root: str, rel: str) -> None:
        self.name, self.path = rel, osp.join(root, rel)


def _iter_images(root: str, extensions: Sequence[str],
                 exclude: Sequence[str]) -> Iterator[_Image]:
    for rel_dir, names in walk_files(root, extensions, exclude):
        for name in names:
            yield _Image(root, name if rel_dir == '.' else
                         f'{rel_dir}/{name}')


def _outcome(detector: Callable, item: _Image) -> Outcome:
    rec = decide(detector, item.path)
    if rec.pop('status') == 'unreadable':
        return Outcome('failed', error=rec['error'])
    return Outcome('ok', frames=1, extra=rec)


def curate_images_sharded(root: str,
                          out_dir: Optional[str] = None,
                          detector: Optional[Callable] = None,
                          score_thr: Optional[float] = None,
                          min_box_size: Optional[float] = None,
                          rank: int = 0,
                          world_size: int = 1,
                          restart: bool = False,
                          extensions: Sequence[str] = IMAGE_EXTENSIONS,
                          progress_interval: float = 30.0,
                          rank_timeout: Optional[float] = None
                          ) -> Optional[CurationReport]:
    """:func:`~sapiens_mm.datasets.curation.curate_images` split across the
    processes of a job.

    Rank 0 walks ``root`` lazily and each rank runs the detector on its
    share of the images (a fixed split by path, per-rank manifests,
    resume, lost ranks, SIGTERM: :class:`~.run.ShardedRun`); rank 0 then
    merges the decisions
    into ``manifest.jsonl`` (one record per image with its detections) and
    writes the same ``manifest.txt`` and ``report.json`` as
    ``curate_images`` (the kept paths, sorted: held in memory, one string
    per kept image). As there, the thresholds are applied to the stored
    detections at the end, so a re-run with other thresholds runs no
    detector.

    Args:
        root: Image folder, walked recursively.
        out_dir: Output folder. Defaults to ``<root>/curation``.
        detector: Person detector (default: the OpenCV face detector).
        score_thr: Minimum detection score (default: the detector's).
        min_box_size: Minimum longer box side in pixels (default: the
            detector's).
        rank: This process's rank.
        world_size: Number of processes.
        restart: Detect every image again.
        extensions: Image file endings.
        progress_interval: Seconds between rank 0's progress lines.
        rank_timeout: Seconds without a heartbeat after which a rank
            counts as lost (see :class:`~.run.ShardedRun`).

    Returns:
        The report on rank 0 once every rank is done; None on the other
        ranks.

    Raises:
        RunStopped: SIGTERM stopped the run (exit with
            :data:`~.run.REQUEUE_EXIT_CODE`).
        RanksLost: Ranks stopped before finishing (rank 0 names them;
            re-running resumes).
        ValueError: ``out_dir`` holds the decisions of another detector
            (use another ``out_dir`` or ``restart``).
        FileNotFoundError: ``root`` is not a folder.
    """
    detector, score_thr, min_box_size, desc = curation_settings(
        detector, score_thr, min_box_size)
    if not osp.isdir(root):
        raise FileNotFoundError(
            f'Image folder not found: {root}. Pass the folder that holds the '
            'images (it is scanned recursively).')
    out_dir = out_dir or osp.join(root, 'curation')
    run = ShardedRun(out_dir, dict(detector=desc, root=osp.abspath(root)),
                     rank, world_size, overwrite=restart,
                     progress_interval=progress_interval, what='images',
                     rank_timeout=rank_timeout, require_outputs=False)
    run.start()
    run.run(_iter_images(root, extensions, [out_dir]),
            lambda batch: [_outcome(detector, item) for item in batch])
    summary = run.finish()
    if summary is None:
        return None
    report = CurationReport(
        score_thr=score_thr, min_box_size=min_box_size, detector=desc,
        manifest=osp.join(out_dir, MANIFEST_NAME),
        detected=summary['processed'] + summary['failed'],
        reused=summary['skipped'])
    kept = []
    for rec in iter_records([osp.join(out_dir, MERGED_NAME)]):
        report.total += 1
        if rec['status'] != 'ok':
            report.unreadable += 1
        elif is_kept(rec.get('detections', []), score_thr, min_box_size):
            report.kept += 1
            kept.append(rec['name'])
        else:
            report.dropped += 1
    kept.sort()
    write_curation_outputs(report, kept, desc, out_dir)
    return report
