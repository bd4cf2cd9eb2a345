"""``hf://`` files in a distributed job: one download per node, one error
for every rank, no wait without end.

In a job of several processes (``torchrun``, SLURM, ``mpirun``), each
node's local rank 0 (``LOCAL_RANK``) fetches the file into its node's
Hugging Face cache (nodes may have caches of their own, or share one on a
network file system) while the node's other ranks wait, then read it from
the cache. The ranks tell each other how it went through the job's c10d
store, the TCP store at ``MASTER_ADDR:MASTER_PORT`` that ``torchrun`` and
``init_process_group``'s ``env://`` start, not through a collective of the
process group, which waits up to its own time-out (30 minutes by default):

- an error on any rank (a Hub error on a fetching rank, a file missing from
  a waiting rank's cache) reaches every rank as the same one-line
  :class:`~sapiens_mm.zoo.hub.HubError`, naming the rank;
- a rank that dies or hangs is reported by the others once no fetching rank
  has shown a sign of life for ``SAPIENS_MM_HUB_DIST_TIMEOUT`` seconds
  (default 300): fetching ranks beat a counter in the store while they
  download, so a long download never runs into that limit (its own is
  :class:`~sapiens_mm.zoo.hub.HubLimits`).

Without ``MASTER_ADDR`` / ``MASTER_PORT`` (a process group started another
way) every rank fetches on its own.
"""
import os
import threading
import time
from datetime import timedelta
from typing import Callable, List, Optional, Tuple

from sapiens_mm.utils.env_numbers import env_positive_number

from .hub import HubError, fetch_url

__all__ = ['DIST_TIMEOUT_ENV', 'dist_timeout', 'fetch_url_on_nodes']

#: Seconds a rank waits without a sign of life from the fetching ranks.
DIST_TIMEOUT_ENV = 'SAPIENS_MM_HUB_DIST_TIMEOUT'
_PREFIX = 'sapiens_mm/hf_fetch'


def dist_timeout() -> float:
    """``SAPIENS_MM_HUB_DIST_TIMEOUT`` (seconds, default 300).

    Raises:
        ValueError: Not a positive number.
    """
    return env_positive_number(DIST_TIMEOUT_ENV, 300.0)


def _one_line(error: Exception) -> str:
    text = ' '.join(str(error).split())
    if isinstance(error, (HubError, ValueError, OSError)) and text:
        return text
    return f'{type(error).__name__}: {text}' if text else \
        type(error).__name__


def _attempt(call: Callable[[], str]) -> Tuple[Optional[str], str]:
    """``(path, '')``, or ``(None, the error as one line)``."""
    try:
        return call(), ''
    except Exception as e:  # noqa: BLE001 (handed to every rank)
        return None, _one_line(e)


def _job_store(timeout: float):
    """A client of the job's TCP store, or None without ``MASTER_ADDR`` /
    ``MASTER_PORT``."""
    addr, port = os.environ.get('MASTER_ADDR'), os.environ.get(
        'MASTER_PORT', '')
    if not addr or not port.isdigit():
        return None
    from torch.distributed import TCPStore
    return TCPStore(addr, int(port), is_master=False,
                    timeout=timedelta(seconds=timeout),
                    wait_for_workers=False)


class _Heartbeat:
    """Adds 1 to a store counter every ``interval`` seconds from a thread
    (a client of its own) while the ``with`` block runs."""

    def __init__(self, key: str, interval: float, timeout: float):
        self.key, self.interval, self.timeout = key, interval, timeout
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True,
                                       name='sapiens_mm-hub-heartbeat')

    def _run(self) -> None:
        try:
            store = _job_store(self.timeout)
            while True:
                store.add(self.key, 1)
                if self.stop.wait(self.interval):
                    return
        except Exception:  # noqa: BLE001 (the waiting ranks report it)
            return

    def __enter__(self) -> '_Heartbeat':
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


def _gather(store, keys: List[str], beats: str, timeout: float,
            url: str) -> List[str]:
    """Every rank's value of ``keys``, waiting while the heartbeat counter
    ``beats`` moves and at most ``timeout`` seconds after it stopped.

    The store is polled (``check``, from every 50 ms up to every 2 s), not
    waited on with a time-out, which c10d reports on stderr each time."""
    last, changed, poll = None, time.monotonic(), 0.05
    while not store.check(keys):
        count = store.add(beats, 0)
        if count != last:
            last, changed = count, time.monotonic()
        elif time.monotonic() - changed > timeout:
            missing = [str(r) for r, key in enumerate(keys)
                       if not store.check([key])]
            raise HubError(
                f'{url}: rank {", ".join(missing)} did not report for '
                f'{timeout:g} s (it died or hangs: see its log; '
                f'{DIST_TIMEOUT_ENV} sets the limit).')
        time.sleep(poll)
        poll = min(2.0, poll * 1.5)
    return [store.get(key).decode() for key in keys]


def _raise_first(values: List[str]) -> None:
    for rank, error in enumerate(values):
        if error:
            raise HubError(f'rank {rank}: {error}')


def fetch_url_on_nodes(url: str, timeout: Optional[float] = None) -> str:
    """The local path of ``url`` (``hf://...``, see
    :func:`~sapiens_mm.zoo.hub.fetch_url`) on every rank of a distributed
    job, fetched once per node (see the module's notes); in a single
    process, :func:`~sapiens_mm.zoo.hub.fetch_url`.

    Every rank must call it, in the same order, like a collective.

    Args:
        url: The ``hf://`` URL.
        timeout: Seconds without a sign of life from the fetching ranks
            before a rank gives up (default :func:`dist_timeout`).

    Raises:
        HubError: On every rank, the same one line: the first rank's error,
            or which ranks did not report in time.
    """
    from mmengine.dist import get_dist_info
    rank, world_size = get_dist_info()
    if world_size == 1:
        return fetch_url(url)
    timeout = timeout or dist_timeout()
    try:
        store = _job_store(timeout)
    except Exception as e:  # noqa: BLE001 (a line on every rank)
        raise HubError(f'{url}: cannot reach the job\'s store at '
                       f'{os.environ.get("MASTER_ADDR")}:'
                       f'{os.environ.get("MASTER_PORT")} ({_one_line(e)}).'
                       ) from None
    if store is None:
        return fetch_url(url)
    local_rank = os.environ.get('LOCAL_RANK', '')
    fetching = not local_rank.isdigit() or int(local_rank) == 0
    try:
        # the n-th call of every rank meets under the same keys; a restart
        # of the job (torchrun --max-restarts) starts a new series
        base = f'{_PREFIX}/{os.environ.get("TORCHELASTIC_RESTART_COUNT", 0)}'
        key = f'{base}/{store.add(f"{base}/calls/{rank}", 1)}'
        beats = f'{key}/beats'
        path, error = None, ''
        if fetching:
            with _Heartbeat(beats, min(5.0, timeout / 6), timeout):
                path, error = _attempt(lambda: fetch_url(url))
        store.set(f'{key}/fetched/{rank}', error)
        _raise_first(_gather(store, [f'{key}/fetched/{r}'
                                     for r in range(world_size)], beats,
                             timeout, url))
        if not fetching:  # the node's fetching rank has it in the cache
            path, error = _attempt(lambda: fetch_url(url, local_only=True))
        store.set(f'{key}/ready/{rank}', error)
        _raise_first(_gather(store, [f'{key}/ready/{r}'
                                     for r in range(world_size)], beats,
                             timeout, url))
    except HubError:
        raise
    except Exception as e:  # noqa: BLE001 (the store failed: a line)
        raise HubError(f'{url}: lost the job\'s store ({_one_line(e)}); '
                       'the launcher or a rank died.') from None
    return path
