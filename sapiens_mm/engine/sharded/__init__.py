"""Sharded, resumable runs over millions of inputs on ``torch.distributed``
(inference and curation): deterministic shards, per-rank manifests merged
at the end, resume, SIGTERM requeue (see :mod:`.run` and :mod:`.manifest`).
"""
from .curation import curate_images_sharded
from .manifest import (MANIFEST_DIR, MERGED_NAME, SUMMARY_NAME, DoneIndex,
                       ManifestWriter, iter_records, manifest_files,
                       merge_manifests, name_hash)
from .run import (LAUNCHERS, REQUEUE_EXIT_CODE, Outcome, RunStopped,
                  ShardedRun,
                  init_distributed, local_device, progress_line,
                  summary_lines, unfinished_ranks)

__all__ = [
    'MANIFEST_DIR', 'MERGED_NAME', 'SUMMARY_NAME', 'DoneIndex',
    'ManifestWriter', 'iter_records', 'manifest_files', 'merge_manifests',
    'name_hash', 'LAUNCHERS', 'REQUEUE_EXIT_CODE', 'Outcome', 'RunStopped',
    'ShardedRun',
    'init_distributed', 'local_device', 'progress_line', 'summary_lines',
    'unfinished_ranks', 'curate_images_sharded'
]
