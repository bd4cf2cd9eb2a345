""":class:`~.sapiens_inferencer.SapiensInferencer` over millions of inputs,
sharded across the processes of a ``torchrun`` / SLURM job (or run as one
resumable process): :func:`infer_sharded`, and the consolidated COCO
keypoint results of such a run (:func:`write_coco_keypoint_results`).

The per-input files are exactly those of a single-process call (same names,
same content): each batch of inputs goes through
:meth:`SapiensInferencer.stream` with the names
:func:`~.utils.sources.iter_sources` gave them. The sharding, manifests,
resume and SIGTERM handling are :class:`sapiens_mm.engine.sharded.ShardedRun`.
"""
import json
import os.path as osp
from typing import List, Optional, Sequence

from sapiens_mm.engine.fileio import atomic_path
from sapiens_mm.engine.sharded import (MERGED_NAME, Outcome, ShardedRun,
                                       iter_records)

from .sapiens_inferencer import SapiensInferencer
from .utils.sources import Source, iter_sources

__all__ = ['infer_sharded', 'write_coco_keypoint_results']


class _Abandoned(Exception):
    """Thrown into the inferencer's stream to drop the video in flight
    (its partial ``.mp4`` is deleted, nothing is recorded)."""


def _process_batch(inferencer: SapiensInferencer, run: ShardedRun,
                   batch: List[Source], stream_kwargs: dict
                   ) -> List[Outcome]:
    """Run the inferencer on one batch; one outcome per source."""
    files = {s.path: [] for s in batch}
    frames = {s.path: 0 for s in batch}
    nonfinite = {s.path: {} for s in batch}
    stream = inferencer.stream(batch, out_dir=run.out_dir,
                               show_progress=False, **stream_kwargs)
    try:
        for result in stream:
            path = result['input']
            frames[path] += 1
            files[path] += list(result['pred_files'].values())
            files[path] += list(result['vis_files'].values())
            for task, n in result['nonfinite'].items():
                nonfinite[path][task] = nonfinite[path].get(task, 0) + n
            if run.stop_requested and batch[0].kind == 'video':
                stream.throw(_Abandoned())
    except _Abandoned:
        return [Outcome('abandoned')]
    except OSError:
        raise  # a full disk, a lost mount...: stop this rank
    except Exception as e:  # noqa: BLE001 (an input the models fail on)
        if len(batch) > 1:  # find which input it was
            return [
                outcome for s in batch for outcome in _process_batch(
                    inferencer, run, [s], stream_kwargs)
            ]
        return [Outcome('failed', error=f'{type(e).__name__}: {e}')]
    skipped = dict(inferencer.skipped)
    outcomes = []
    for s in batch:
        extra = dict(nonfinite=nonfinite[s.path]) if nonfinite[s.path] else {}
        if s.path in skipped or not frames[s.path]:
            outcomes.append(Outcome('failed', files[s.path],
                                    skipped.get(s.path, 'no output'),
                                    frames[s.path], extra))
        else:
            outcomes.append(Outcome('ok', files[s.path], None, frames[s.path],
                                    extra))
    return outcomes


def infer_sharded(inferencer: SapiensInferencer,
                  inputs: Sequence[str],
                  out_dir: str,
                  options: dict,
                  rank: int = 0,
                  world_size: int = 1,
                  overwrite: bool = False,
                  progress_interval: float = 30.0,
                  rank_timeout: Optional[float] = None,
                  **stream_kwargs) -> Optional[dict]:
    """Run ``inferencer`` on this rank's share of ``inputs``, writing to
    ``out_dir``; resumes an earlier run of ``out_dir``.

    Args:
        inferencer: The models.
        inputs: One folder, list file or glob, or image / video files
            (:func:`~.utils.sources.iter_sources`).
        out_dir: The output folder: the outputs of
            :meth:`SapiensInferencer.stream`, plus ``manifest.jsonl``,
            ``summary.json`` and ``manifests/``.
        options: What decides the outputs (models, tasks, output options),
            compared with an earlier run of ``out_dir``.
        rank: This process's rank.
        world_size: Number of processes.
        overwrite: Redo every input.
        progress_interval: Seconds between rank 0's progress lines.
        rank_timeout: Seconds without a heartbeat after which a rank counts
            as lost (see :class:`~sapiens_mm.engine.sharded.ShardedRun`;
            default ``SAPIENS_MM_RANK_TIMEOUT``, else 600).
        **stream_kwargs: Options of :meth:`SapiensInferencer.stream`
            (``bboxes``, ``no_save_pred``...; not ``show``).

    Returns:
        The run's summary on rank 0 once every rank is done; None on the
        other ranks.

    Raises:
        sapiens_mm.engine.sharded.RunStopped: SIGTERM stopped the run
            (exit with :data:`~sapiens_mm.engine.sharded.REQUEUE_EXIT_CODE`).
        sapiens_mm.engine.sharded.RanksLost: Ranks stopped before
            finishing (rank 0 names them and their in-flight inputs;
            re-running resumes).
    """
    run = ShardedRun(out_dir, options, rank, world_size, overwrite,
                     progress_interval, what='inputs',
                     rank_timeout=rank_timeout)
    run.start()
    run.run(iter_sources(inputs, [out_dir]),
            lambda batch: _process_batch(inferencer, run, batch,
                                         stream_kwargs),
            inferencer.batch_size,
            make_item=lambda name, path, kind: Source(kind, name, 0,
                                                      path=path))
    return run.finish()


def write_coco_keypoint_results(out_dir: str, path: str) -> int:
    """The COCO keypoint results file of a finished run, for
    ``pycocotools``' ``COCO.loadRes`` and ``COCOeval(..., 'keypoints')``.

    Every image recorded ``ok`` in ``out_dir``'s merged manifest with a pose
    file (``pose/<name>.json``) gives one result per person: its keypoints
    in the COCO-17 layout (converted from the model's layout, as
    ``--export-format coco17``) as ``[x, y, score] * 17``, ``category_id``
    1 and ``score`` = box score x the mean score of its keypoints. The
    ``image_id`` is the file stem as a number when it is one (COCO's
    ``000000000139.jpg`` is 139), else the output name. Videos are left
    out. Written atomically, streaming (bounded memory).

    Returns:
        The number of results written.

    Raises:
        ValueError: The run has no merged manifest or no pose files.
    """
    from sapiens_mm.datasets.keypoint_formats import convert_pose_record
    merged = osp.join(out_dir, MERGED_NAME)
    if not osp.isfile(merged):
        raise ValueError(f'{out_dir} has no {MERGED_NAME}: the run is not '
                         'finished (run it again to complete it).')
    n = 0
    with atomic_path(path) as tmp, open(tmp, 'w', encoding='utf-8') as out:
        out.write('[')
        for record in iter_records([merged]):
            pose_file = osp.join(out_dir, 'pose', record['name'] + '.json')
            if (record.get('status') != 'ok' or record.get('kind') != 'image'
                    or not osp.isfile(pose_file)):
                continue
            with open(pose_file, encoding='utf-8') as f:
                doc = convert_pose_record(json.load(f), 'coco17')
            stem = osp.splitext(osp.basename(record['input']))[0]
            image_id = int(stem) if stem.isdigit() else record['name']
            for inst in doc['instances']:
                out.write(',\n' if n else '\n')
                out.write(json.dumps(dict(
                    image_id=image_id, category_id=1,
                    keypoints=inst['keypoints'],
                    score=float(inst['bbox_score']) * float(inst['score']))))
                n += 1
        if n == 0:  # nothing is written under ``path``
            raise ValueError(
                f'No pose result in {out_dir}: --coco-results needs a pose '
                'model and the pose .json files (no --no-save-pred).')
        out.write('\n]\n')
    return n
