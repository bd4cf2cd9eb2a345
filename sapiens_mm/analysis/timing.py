"""Wall-time statistics, timing loops and peak memory of benchmark runs."""
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable, List, Optional

import torch

__all__ = ['TimingStats', 'time_callable', 'sync', 'PeakMemory',
           'SPREAD_WARNING']

#: ``max / min`` of repeats above which :attr:`TimingStats.spread_warning`
#: says that the runs disagree (machine load, clocks, thermal throttling):
#: 20 % more than the fastest run.
SPREAD_WARNING = 1.2


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA); nothing on CPU."""
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


@dataclass
class TimingStats:
    """Wall times of repeated runs, in seconds."""
    times: List[float]

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def min(self) -> float:
        return min(self.times)

    @property
    def max(self) -> float:
        return max(self.times)

    @property
    def iqr(self) -> float:
        """Interquartile range (``statistics.quantiles``' 'inclusive'
        method, defined from 2 runs on; 0 for one run)."""
        if len(self.times) < 2:
            return 0.0
        q = statistics.quantiles(self.times, n=4, method='inclusive')
        return q[2] - q[0]

    @property
    def spread(self) -> float:
        """``max / min``: 1.0 when every run took the same time."""
        return self.max / self.min if self.min > 0 else float('inf')

    @property
    def spread_warning(self) -> Optional[str]:
        """A sentence when the slowest run took more than
        :data:`SPREAD_WARNING` times the fastest one, else None."""
        if self.spread <= SPREAD_WARNING:
            return None
        return (f'runs spread {100 * (self.spread - 1):.0f} % (min '
                f'{self.min:.4g} s, max {self.max:.4g} s): other load on '
                'the machine; trust the min-based figures more')


def time_callable(fn: Callable[[], object], device: torch.device,
                  warmup: int = 1, repeats: int = 3,
                  min_time: float = 0.0) -> TimingStats:
    """Time ``fn`` after ``warmup`` calls: ``repeats`` calls, more while
    their total is below ``min_time`` seconds (at most 100)."""
    for _ in range(warmup):
        fn()
    sync(device)
    times: List[float] = []
    while len(times) < repeats or (sum(times) < min_time
                                   and len(times) < 100):
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return TimingStats(times)


class PeakMemory:
    """Peak memory of the code run inside the context.

    CUDA: ``torch.cuda.max_memory_allocated`` (reset on entry). CPU: the
    resident-set high-water mark of the process (``VmHWM``, reset on entry
    through ``/proc/self/clear_refs`` on Linux; elsewhere
    ``resource.getrusage`` cannot be reset and gives the process peak).

    Attributes:
        peak: Peak bytes (allocated tensors on CUDA, resident memory on
            CPU) while inside.
        base: Bytes at entry (same measure).
        exact: False when the CPU peak could not be reset (it may then
            predate the context).
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.peak = self.base = 0
        self.exact = True

    @staticmethod
    def _status(key: str) -> Optional[int]:
        try:
            with open('/proc/self/status') as f:
                for line in f:
                    if line.startswith(key + ':'):
                        return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None

    def __enter__(self) -> 'PeakMemory':
        if self.device.type == 'cuda':
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.base = torch.cuda.memory_allocated(self.device)
            return self
        try:
            with open('/proc/self/clear_refs', 'w') as f:
                f.write('5')  # resets VmHWM to the current RSS
        except OSError:
            self.exact = False
        self.base = self._status('VmRSS') or 0
        return self

    def __exit__(self, *exc) -> None:
        if self.device.type == 'cuda':
            torch.cuda.synchronize(self.device)
            self.peak = torch.cuda.max_memory_allocated(self.device)
            return
        peak = self._status('VmHWM')
        if peak is None:
            import resource
            scale = 1 if sys.platform == 'darwin' else 1024
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
            self.exact = False
        self.peak = peak
