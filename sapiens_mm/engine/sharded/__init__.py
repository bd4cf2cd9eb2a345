"""Sharded, resumable runs over millions of inputs on ``torch.distributed``
(inference and curation): deterministic shards from one listing, per-rank
manifests merged at the end, resume, heartbeats and lost-rank reports,
SIGTERM requeue (see :mod:`.run`, :mod:`.listing` and :mod:`.manifest`).
"""
from .curation import curate_images_sharded
from .listing import ListedItem, ListingFailed
from .manifest import (MANIFEST_DIR, MERGED_NAME, SUMMARY_NAME, DoneIndex,
                       ManifestWriter, iter_records, manifest_files,
                       merge_manifests, name_hash, sync_file_system)
from .run import (LAUNCHERS, REQUEUE_EXIT_CODE, Outcome, RanksLost,
                  RunStopped, ShardedRun, init_distributed, local_device,
                  progress_line, remove_leftovers, summary_lines,
                  unfinished_ranks)

__all__ = [
    'MANIFEST_DIR', 'MERGED_NAME', 'SUMMARY_NAME', 'DoneIndex',
    'ManifestWriter', 'iter_records', 'manifest_files', 'merge_manifests',
    'name_hash', 'sync_file_system', 'LAUNCHERS', 'REQUEUE_EXIT_CODE',
    'Outcome', 'RanksLost', 'RunStopped', 'ShardedRun', 'ListedItem',
    'ListingFailed', 'init_distributed', 'local_device', 'progress_line',
    'remove_leftovers', 'summary_lines', 'unfinished_ranks',
    'curate_images_sharded'
]
