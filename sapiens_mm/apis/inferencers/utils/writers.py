"""Writing predictions and visualisations: ``.npy``, ``.json``, ``.png``
and one ``.mp4`` per video and task.

``.npy``, ``.json`` and ``.png`` files are written atomically
(:func:`sapiens_mm.engine.fileio.atomic_write`: temporary file, ``fsync``,
rename): a full disk or a kill leaves no truncated file under a final name,
and the error names the file."""
import io
import json
import os
import os.path as osp
from typing import Dict, Tuple

import cv2
import numpy as np

from sapiens_mm.engine.fileio import atomic_write

__all__ = ['write_npy', 'write_json', 'write_png', 'VideoWriters']


def _make_parent(path: str) -> None:
    os.makedirs(osp.dirname(path) or '.', exist_ok=True)


def write_npy(path: str, arr: np.ndarray) -> None:
    """Save an array atomically (folders created).

    Raises:
        OSError: The write failed; the message names ``path``.
    """
    buf = io.BytesIO()
    np.save(buf, arr)
    atomic_write(buf.getvalue(), path)


def write_json(path: str, obj) -> None:
    """Save a JSON-serialisable object atomically (folders created).

    Raises:
        OSError: The write failed; the message names ``path``.
    """
    atomic_write(json.dumps(obj), path)


def write_png(path: str, img: np.ndarray) -> None:
    """Save a BGR uint8 image as PNG atomically (folders created; any path
    encoding).

    Raises:
        RuntimeError: OpenCV cannot encode the image.
        OSError: The write failed; the message names ``path``.
    """
    ok, buf = cv2.imencode('.png', img)
    if not ok:
        raise RuntimeError(f'Could not encode {path} as PNG.')
    atomic_write(buf.tobytes(), path)


class VideoWriters:
    """The open ``.mp4`` writers of a run, one per (video, task).

    Frames of one video come in order; when a frame of another video
    arrives, the writers of the previous one are closed. Frames whose size
    differs from the first frame's are resized to it.
    """

    def __init__(self) -> None:
        self._open: Dict[Tuple[int, str], Tuple[cv2.VideoWriter,
                                                Tuple[int, int]]] = {}

    def write(self, video_id: int, task: str, path: str, img: np.ndarray,
              fps: float) -> None:
        """Append ``img`` (BGR uint8) to the video ``path``.

        Raises:
            RuntimeError: OpenCV cannot write the video.
        """
        key = (video_id, task)
        if key not in self._open:
            for old in [k for k in self._open if k[0] != video_id]:
                self._open.pop(old)[0].release()  # previous video finished
            _make_parent(path)
            size = (img.shape[1], img.shape[0])
            writer = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*'mp4v'),
                                     fps, size)
            if not writer.isOpened():
                raise RuntimeError(f'OpenCV cannot write the video {path} '
                                   '(mp4v codec).')
            self._open[key] = (writer, size)
        writer, size = self._open[key]
        if (img.shape[1], img.shape[0]) != size:
            img = cv2.resize(img, size)
        writer.write(img)

    def release(self) -> None:
        """Close every open video."""
        for writer, _ in self._open.values():
            writer.release()
        self._open.clear()
