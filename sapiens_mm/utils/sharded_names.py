"""Names of a sharded run (:mod:`sapiens_mm.engine.sharded`) that command
lines need to build their parsers, check their options and recognise an
output folder, and the key of its inputs, kept here so that ``--help``,
the checks made before any work and the input listing import neither torch
nor the OpenMMLab packages."""
import hashlib
import os
import os.path as osp
from typing import Optional

from .env_numbers import env_positive_number

__all__ = ['LAUNCHERS', 'MANIFEST_DIR', 'MERGED_NAME', 'SUMMARY_NAME',
           'RUN_NAME', 'RANK_TIMEOUT_ENV', 'DEFAULT_RANK_TIMEOUT',
           'default_rank_timeout', 'resolve_rank_timeout', 'name_hash',
           'check_results_path']

#: The ways a sharded run's processes are started (mmengine's launchers).
LAUNCHERS = ('none', 'pytorch', 'slurm')
#: The folder of a run's per-rank manifests and run record, in --out-dir.
MANIFEST_DIR = 'manifests'
#: The merged manifest, in --out-dir.
MERGED_NAME = 'manifest.jsonl'
#: The run's summary, in --out-dir.
SUMMARY_NAME = 'summary.json'
#: The run record (its options), in the manifest folder.
RUN_NAME = 'run.json'
#: Environment variable with the default of ``--rank-timeout``.
RANK_TIMEOUT_ENV = 'SAPIENS_MM_RANK_TIMEOUT'
#: Seconds without a heartbeat after which a rank counts as lost (rank 0's
#: end-of-run wait; the other ranks' wait for rank 0's input listing). The
#: time counts silence, not work: a rank with a large shard beats while it
#: works, however long it takes.
DEFAULT_RANK_TIMEOUT = 600.0


def default_rank_timeout() -> float:
    """:data:`RANK_TIMEOUT_ENV` if set (seconds), else
    :data:`DEFAULT_RANK_TIMEOUT`.

    Raises:
        ValueError: The variable is not a positive number.
    """
    return env_positive_number(RANK_TIMEOUT_ENV, DEFAULT_RANK_TIMEOUT)


def resolve_rank_timeout(value: Optional[float], what: str) -> float:
    """``value`` seconds, or :func:`default_rank_timeout` when None.

    Raises:
        ValueError: Not a positive, finite number (the message names the
            option as ``what``, e.g. ``--rank-timeout``).
    """
    seconds = default_rank_timeout() if value is None else float(value)
    if not 0 < seconds < float('inf'):
        raise ValueError(f'{what} {value} is not a positive number of '
                         'seconds.')
    return seconds


def name_hash(name: str) -> int:
    """A stable 64-bit hash of an input's output name (BLAKE2b): the same
    in every process and run, unlike Python's ``hash``. It decides the rank
    of an input (``name_hash(name) % world_size``) and keys the done-set,
    the merge and the listing's check that no two inputs share a name."""
    return int.from_bytes(
        hashlib.blake2b(name.encode('utf-8'), digest_size=8).digest(),
        'little')


def check_results_path(path: str, option: str) -> None:
    """Check, before a run starts, that a file the run writes at its end
    (``--coco-results``) can be written: a file name, not a folder, in a
    folder that exists or can be created and can be written to. Nothing is
    created.

    Args:
        path: The file.
        option: The option that named it, for the message.

    Raises:
        ValueError: ``path`` is a folder.
        OSError: Its folder cannot be created or written to.
    """
    path = osp.abspath(osp.expanduser(path))
    if osp.isdir(path):
        raise ValueError(f'{option} {path} is a folder; give the name of the '
                         'file to write, e.g. '
                         f'{osp.join(path, "results.json")}.')
    folder = osp.dirname(path)
    while not osp.lexists(folder):  # the nearest part that exists
        folder = osp.dirname(folder)
    if not osp.isdir(folder):
        raise OSError(f'{option} {path} cannot be written: {folder} is not '
                      'a folder; choose a file in a folder you can write '
                      'to.')
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OSError(f'{option} {path} cannot be written: {folder} is not '
                      'writable; choose a file in a folder you can write '
                      'to.')
