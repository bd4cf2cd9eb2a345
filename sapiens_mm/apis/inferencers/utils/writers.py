"""Writing predictions and visualisations: ``.npy``, ``.json``, ``.png``
and one ``.mp4`` per video and task.

``.npy``, ``.json`` and ``.png`` files are written atomically
(:func:`sapiens_mm.engine.fileio.atomic_write`: temporary file, rename): a
full disk or a kill leaves no truncated file under a final name, and the
error names the file. They are not ``fsync``\\ ed one by one: a sharded
run makes the outputs of the last second durable in one call before it
commits their records (:mod:`sapiens_mm.engine.sharded.manifest`), which
costs a fraction of an ``fsync`` per file. Videos are written to a hidden temporary
``.mp4`` beside the target and renamed when the video is complete."""
import io
import json
import os
import os.path as osp
import tempfile
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
    atomic_write(buf.getvalue(), path, durable=False)


def write_json(path: str, obj) -> None:
    """Save a JSON-serialisable object atomically (folders created).

    Raises:
        OSError: The write failed; the message names ``path``.
    """
    atomic_write(json.dumps(obj), path, durable=False)


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
    atomic_write(buf.tobytes(), path, durable=False)


class VideoWriters:
    """The open ``.mp4`` writers of a run, one per (video, task).

    Frames of one video come in order; when a frame of another video
    arrives, the writers of the previous one are closed. Frames whose size
    differs from the first frame's are resized to it.

    Each video is written into a new private folder beside ``path``
    (``.<name>.tmp<random>/``, created by ``mkdtemp``: mode 0700, a name
    nobody can predict or plant a link under) and moved to ``path`` when
    it is closed, so an interrupted run never leaves a truncated video
    under its final name and OpenCV never writes through a file someone
    else placed. :meth:`discard` removes the temporary folders of a failed
    run.
    """

    def __init__(self) -> None:
        # (video, task) -> (writer, frame size, temporary path, final path)
        self._open: Dict[Tuple[int, str], Tuple[cv2.VideoWriter,
                                                Tuple[int, int], str,
                                                str]] = {}

    @staticmethod
    def temporary_path(path: str) -> str:
        """A new private temporary file to write the video ``path`` to
        (in a new ``0700`` folder beside it; the file itself does not exist
        yet)."""
        folder, name = osp.split(path)
        stem, ext = osp.splitext(name)
        private = tempfile.mkdtemp(prefix=f'.{stem}.tmp', dir=folder or '.')
        return osp.join(private, f'{stem}{ext or ".mp4"}')

    @staticmethod
    def _remove_temporary(tmp: str) -> None:
        if osp.exists(tmp):
            os.remove(tmp)
        try:
            os.rmdir(osp.dirname(tmp))
        except OSError:
            pass

    def _close(self, key: Tuple[int, str]) -> None:
        writer, _, tmp, path = self._open.pop(key)
        writer.release()
        try:
            os.replace(tmp, path)
        except OSError as e:
            raise OSError(f'Could not write the video {path}: {e}') from e
        finally:
            self._remove_temporary(tmp)

    def write(self, video_id: int, task: str, path: str, img: np.ndarray,
              fps: float) -> None:
        """Append ``img`` (BGR uint8) to the video ``path``.

        Raises:
            RuntimeError: OpenCV cannot write the video.
        """
        key = (video_id, task)
        if key not in self._open:
            for old in [k for k in self._open if k[0] != video_id]:
                self._close(old)  # previous video finished
            _make_parent(path)
            size = (img.shape[1], img.shape[0])
            tmp = self.temporary_path(path)
            writer = cv2.VideoWriter(tmp, cv2.VideoWriter_fourcc(*'mp4v'),
                                     fps, size)
            if not writer.isOpened():
                self._remove_temporary(tmp)
                raise RuntimeError(f'OpenCV cannot write the video {path} '
                                   '(mp4v codec).')
            self._open[key] = (writer, size, tmp, path)
        writer, size = self._open[key][:2]
        if (img.shape[1], img.shape[0]) != size:
            img = cv2.resize(img, size)
        writer.write(img)

    def release(self) -> None:
        """Close every open video and move it to its final name.

        Raises:
            OSError: A video could not be renamed; the message names it.
        """
        for key in list(self._open):
            self._close(key)

    def discard(self) -> None:
        """Close every open video and delete its temporary file (the final
        names are left untouched)."""
        for writer, _, tmp, _ in self._open.values():
            writer.release()
            self._remove_temporary(tmp)
        self._open.clear()
