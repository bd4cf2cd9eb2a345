"""Freed memory kept for reuse during CPU inference.

glibc's ``malloc`` serves each allocation above its mmap threshold (at most
32 MB, adapting from 128 KB) with a fresh ``mmap`` and unmaps it on
``free``: every large activation of a forward pass then costs a page fault
per 4 KB page and the kernel's zero-filling, again at every pass. A float32
Sapiens2 0.4b layer at 1024x768 allocates about 260 MB of such tensors;
measured (AMD EPYC, 2 threads, 4 layers): about 37,000 minor page faults
and 80 ms of system time per layer, and the forward pass 5 % faster
without them.

:func:`keep_freed_memory` sets glibc's ``M_MMAP_MAX`` to 0 (large blocks
come from the heap too) and ``M_TRIM_THRESHOLD`` to its maximum (freed
heap memory is not handed back), which is how the allocators PyTorch's CPU
performance guides preload (jemalloc, tcmalloc) behave: from the second
forward pass on, activations reuse memory the process already has. The
process keeps its peak memory until it exits.

It changes the whole process, so only whole programs call it, and it logs
that it did: the command line (``python -m sapiens_mm`` /
``tools/infer.py``), the web demo and the benchmark tools, for CPU runs.
The library (``import sapiens_mm``, ``init_model``, the inferencers) never
does; a service that embeds it and wants the speed calls it itself. Set
``SAPIENS_MM_SYSTEM_MALLOC=1`` to keep ``malloc`` as it is in those
programs too.
"""
import ctypes
import functools
import os
import platform

from mmengine.logging import print_log

__all__ = ['keep_freed_memory']

# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
_INT_MAX = 2**31 - 1


@functools.lru_cache(maxsize=None)
def keep_freed_memory() -> bool:
    """Make this process's glibc ``malloc`` keep freed memory for reuse
    (see the module docstring: for whole programs only); once per process,
    logged.

    Returns:
        Whether it applies: False where the C library is not glibc, where
        ``mallopt`` refuses, or with ``SAPIENS_MM_SYSTEM_MALLOC`` set to
        anything but ``0``.
    """
    if os.environ.get('SAPIENS_MM_SYSTEM_MALLOC', '0') != '0':
        return False
    if platform.system() != 'Linux' or platform.libc_ver()[0] != 'glibc':
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    if not (mallopt(_M_MMAP_MAX, 0) and mallopt(_M_TRIM_THRESHOLD, _INT_MAX)):
        return False
    print_log(
        'This program sets malloc to keep freed memory for reuse (no page '
        'faults on every large activation of CPU inference; the process '
        'keeps its peak memory). Set SAPIENS_MM_SYSTEM_MALLOC=1 to turn this '
        'off.', logger='current')
    return True
