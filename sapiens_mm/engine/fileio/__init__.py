from .atomic_local_backend import (AtomicLocalBackend, atomic_write,
                                   register_atomic_backend)
from .resumable_checkpoint import (find_resumable_checkpoint,
                                   is_complete_checkpoint)

register_atomic_backend()

__all__ = [
    'AtomicLocalBackend', 'atomic_write', 'register_atomic_backend',
    'find_resumable_checkpoint', 'is_complete_checkpoint'
]
