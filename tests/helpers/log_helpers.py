"""Capture what sapiens_mm logs (mmengine's current MMLogger)."""
import contextlib
import logging
from typing import Iterator, List

from mmengine.logging import MMLogger


@contextlib.contextmanager
def logged_warnings() -> Iterator[List[str]]:
    """The messages of the warnings (and worse) logged inside the block,
    filled in as they come."""
    messages: List[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: messages.append(record.getMessage())
    logger = MMLogger.get_current_instance()
    logger.addHandler(handler)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
