from .atomic_local_backend import (ATOMIC_BACKEND, AtomicLocalBackend,
                                   atomic_path, atomic_write,
                                   ensure_writable_dir, register_atomic_backend,
                                   remove_stale_temp_files,
                                   use_atomic_checkpoints)
from .resumable_checkpoint import (check_resumable,
                                   find_resumable_checkpoint,
                                   is_complete_checkpoint)

register_atomic_backend()

__all__ = [
    'ATOMIC_BACKEND', 'AtomicLocalBackend', 'atomic_path', 'atomic_write',
    'register_atomic_backend', 'use_atomic_checkpoints',
    'remove_stale_temp_files', 'ensure_writable_dir',
    'find_resumable_checkpoint', 'is_complete_checkpoint', 'check_resumable'
]
