"""Running an iterator ahead of its consumer in a worker thread."""
import queue
import threading
from typing import Iterator, TypeVar

__all__ = ['in_background']

T = TypeVar('T')
_DONE = object()


def in_background(items: Iterator[T], depth: int = 2) -> Iterator[T]:
    """Iterate ``items`` in a worker thread, up to ``depth`` items ahead of
    the consumer.

    An exception raised by ``items`` is raised in the consumer; closing the
    returned generator stops the worker (and closes ``items``, e.g. to
    release an open video).

    Args:
        items: The iterator to run ahead (its code runs in the worker).
        depth: Items buffered at most. Defaults to 2.

    Yields:
        The items of ``items``, in order.
    """
    buf: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(entry) -> bool:
        while not stop.is_set():
            try:
                buf.put(entry, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            for item in items:
                if not put((item, None)):
                    return
            put((_DONE, None))
        except BaseException as e:  # noqa: B036 (re-raised by the consumer)
            put((_DONE, e))
        finally:
            close = getattr(items, 'close', None)
            if close is not None:
                close()

    worker = threading.Thread(target=work, name='sapiens-prefetch',
                              daemon=True)
    worker.start()
    try:
        while True:
            item, error = buf.get()
            if item is _DONE:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()
        worker.join()
