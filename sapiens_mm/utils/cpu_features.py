"""What the CPU this process runs on can do, from the kernel's report."""
import functools
from typing import FrozenSet

__all__ = ['cpu_flags', 'cpu_has_native_bf16']


@functools.lru_cache(maxsize=None)
def cpu_flags() -> FrozenSet[str]:
    """The x86 feature flags of ``/proc/cpuinfo`` (Linux; empty elsewhere
    or when unreadable)."""
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('flags'):
                    return frozenset(line.split(':', 1)[1].split())
    except OSError:
        pass
    return frozenset()


def cpu_has_native_bf16() -> bool:
    """Whether the CPU computes bf16 products natively (AVX512_BF16 or
    AMX-BF16), which makes bf16 inference faster than fp32 on it; without
    them PyTorch emulates bf16 matmuls and bf16 is slower (measured 4x on
    an AVX2 CPU)."""
    flags = cpu_flags()
    return 'avx512_bf16' in flags or 'amx_bf16' in flags
