"""Inputs of the inferencers: images, folders, arrays, videos and webcams.

:func:`collect_sources` turns what the user gave into :class:`Source`
entries (one per image file, array, video or webcam) with unique output
names; :func:`iter_frames` decodes them into :class:`Frame` objects, one
per image or video frame.
"""
import os
import os.path as osp
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Union

import cv2
import numpy as np
from mmengine.logging import print_log

from sapiens_mm.utils.image_io import (IMAGE_EXTENSIONS, VIDEO_EXTENSIONS,
                                       ImageTooLargeError,
                                       UnreadableImageError, check_image_size,
                                       read_image)

__all__ = [
    'InputType', 'InputsType', 'Source', 'Frame', 'check_array',
    'collect_sources', 'unique_names', 'iter_frames', 'count_frames'
]

InputType = Union[str, Path, np.ndarray, int]
InputsType = Union[InputType, Sequence[InputType]]
_WEBCAM = re.compile(r'^(webcam(:(?P<a>\d+))?|(?P<b>\d+))$')
#: OpenCV takes camera indices as C ints.
_MAX_CAM = 2**31 - 1


def _webcam(cam: int, index: int) -> 'Source':
    if not 0 <= cam <= _MAX_CAM:
        raise ValueError(f'Input {index}: webcam index {cam} is out of range; '
                         'give a camera index such as 0 or 1.')
    return Source('webcam', f'webcam_{cam}', index, cam=cam)


@dataclass
class Source:
    """One input.

    Attributes:
        kind: ``'image'``, ``'array'``, ``'video'`` or ``'webcam'``.
        name: Output name (file stem, relative path inside a folder input,
            ``array_NNNN`` or ``webcam_N``), unique among the sources.
        index: Position in the user's inputs (for per-input boxes).
        path: File path of an image or video.
        array: The (H, W, 3) BGR image of an array input.
        cam: Webcam index.
        fps: Frame rate of a video (read when it is opened).
    """
    kind: str
    name: str
    index: int
    path: Optional[str] = None
    array: Optional[np.ndarray] = None
    cam: Optional[int] = None
    fps: float = 30.0


@dataclass
class Frame:
    """One image or video frame of a :class:`Source`.

    Attributes:
        source: Where it comes from.
        image: (H, W, 3) uint8 BGR.
        frame_index: Frame number in a video / webcam stream, None for
            images.
    """
    source: Source
    image: np.ndarray
    frame_index: Optional[int] = None


def check_array(arr: np.ndarray, index: int) -> np.ndarray:
    """An input array as an (H, W, 3) uint8 BGR image.

    Raises:
        ValueError: Not uint8, or not (H, W) / (H, W, 3).
    """
    if arr.dtype != np.uint8:
        raise ValueError(
            f'Input array {index} has dtype {arr.dtype}; pass uint8 images '
            '(BGR, as returned by cv2.imread).')
    if arr.ndim == 2:
        return cv2.cvtColor(arr, cv2.COLOR_GRAY2BGR)
    if arr.ndim != 3 or arr.shape[2] != 3:
        raise ValueError(
            f'Input array {index} has shape {arr.shape}; pass an (H, W, 3) '
            'BGR or (H, W) grayscale image.')
    return arr


def collect_sources(inputs: InputsType) -> List[Source]:
    """The sources of ``inputs``.

    Args:
        inputs: An image / video / folder path, a BGR uint8 array, a webcam
            index (``0``, ``'0'``, ``'webcam'``, ``'webcam:1'``) or a list of
            these. Folders are searched recursively for images.

    Returns:
        One source per image (of a folder too), array, video or webcam.

    Raises:
        FileNotFoundError: A path that does not exist.
        ValueError: A folder without images, or a bad array.
        TypeError: An input of another type.
    """
    if isinstance(inputs, (str, Path, np.ndarray, int)):
        inputs = [inputs]
    sources: List[Source] = []
    for index, item in enumerate(inputs):
        if isinstance(item, np.ndarray):
            sources.append(
                Source('array', f'array_{index:04d}', index,
                       array=check_array(item, index)))
            continue
        if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            sources.append(_webcam(int(item), index))
            continue
        if not isinstance(item, (str, Path)):
            raise TypeError(
                f'Input {index} has type {type(item).__name__}; give an '
                'image / video / folder path, a BGR uint8 array or a '
                'webcam index.')
        path = osp.expanduser(str(item))
        if osp.isdir(path):
            files = sorted(
                str(p) for p in Path(path).rglob('*')
                if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS)
            if not files:
                raise ValueError(
                    f'No image ({", ".join(IMAGE_EXTENSIONS)}) in folder '
                    f'{path}.')
            for f in files:
                rel = osp.splitext(osp.relpath(f, path))[0]
                sources.append(
                    Source('image', rel.replace(os.sep, '/'), index, path=f))
        elif osp.isfile(path):
            stem = osp.splitext(osp.basename(path))[0]
            kind = 'video' if path.lower().endswith(
                VIDEO_EXTENSIONS) else 'image'
            sources.append(Source(kind, stem, index, path=path))
        elif _WEBCAM.match(str(item)):
            m = _WEBCAM.match(str(item))
            sources.append(
                _webcam(int(m.group('a') or m.group('b') or 0), index))
        else:
            raise FileNotFoundError(
                f'Input not found: {path}. Give an image, video or folder '
                'path, a BGR array, or a webcam index (0, "webcam", '
                '"webcam:1").')
    unique_names(sources)
    return sources


def unique_names(sources: Sequence[Source]) -> Dict[str, str]:
    """Give every source its own output name, in place.

    The first source with a name keeps it; a later one gets the smallest
    ``_1``, ``_2``... suffix that no other source has (so ``x.jpg``,
    ``x.png`` and ``x_1.png`` become ``x``, ``x_2`` and ``x_1``: no output
    overwrites another). Each renaming is logged.

    Returns:
        ``{input: new name}`` of the renamed sources.
    """
    taken, later = set(), []
    for src in sources:
        if src.name in taken:
            later.append(src)
        else:
            taken.add(src.name)
    renamed = {}
    for src in later:
        n = 1
        while f'{src.name}_{n}' in taken:
            n += 1
        old, src.name = src.name, f'{src.name}_{n}'
        taken.add(src.name)
        key = src.path if src.path is not None else old
        renamed[key] = src.name
        print_log(f'{key}: another input is also named {old!r}; its outputs '
                  f'are named {src.name!r}.', logger='current')
    return renamed


def iter_frames(sources: Sequence[Source], max_frames: Optional[int],
                skip: Callable[[Source, str], None]) -> Iterator[Frame]:
    """Decode the sources, one frame at a time.

    Args:
        sources: From :func:`collect_sources`.
        max_frames: Read at most this many frames of each video / webcam
            (None: all).
        skip: Called with a source that yields nothing (an unreadable
            image, a video that cannot be opened or has no frame) and the
            reason.

    Yields:
        The frames, in order.

    Raises:
        RuntimeError: A webcam cannot be opened.
    """
    for src in sources:
        if src.kind == 'array':
            yield Frame(src, src.array)
        elif src.kind == 'image':
            try:
                img = read_image(src.path, backend='cv2')
            except ImageTooLargeError as e:
                skip(src, str(e))
                continue
            except UnreadableImageError as e:
                skip(src, f'not a readable image ({e.__cause__ or e})')
                continue
            yield Frame(src, img)
        else:
            cap = cv2.VideoCapture(src.cam if src.kind ==
                                   'webcam' else src.path)
            if not cap.isOpened():
                if src.kind == 'webcam':
                    raise RuntimeError(f'Cannot open webcam {src.cam}: check '
                                       'the camera index and permissions.')
                skip(src, 'OpenCV cannot open the video')
                continue
            name = f'webcam {src.cam}' if src.kind == 'webcam' else src.path
            try:
                # the frame size from the container / camera, before decoding
                width = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH))
                height = int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
                if width > 0 and height > 0:
                    check_image_size(width, height, f'{name} (frame size)')
            except ImageTooLargeError as e:
                cap.release()
                if src.kind == 'webcam':
                    raise
                skip(src, str(e))
                continue
            fps = cap.get(cv2.CAP_PROP_FPS)
            src.fps = float(fps) if fps and fps > 0 and np.isfinite(
                fps) else 30.0
            declared = int(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0) \
                if src.kind == 'video' else 0
            i = 0
            try:
                while max_frames is None or i < max_frames:
                    ok, frame = cap.read()
                    if not ok:
                        break
                    if i == 0 and not (width > 0 and height > 0):
                        check_image_size(frame.shape[1], frame.shape[0],
                                         f'{name} (frame size)')
                    yield Frame(src, frame, i)
                    i += 1
            finally:
                cap.release()
            if i == 0:
                skip(src, 'no frame could be read')
            elif 0 < i < declared - 1 and (max_frames is None
                                           or i < max_frames):
                # (the declared count may be an estimate: one frame slack)
                print_log(f'{src.path}: only {i} of its {declared} frames '
                          'could be decoded (the file is cut short or '
                          'corrupt after that); its outputs end there.',
                          logger='current', level=30)


def count_frames(sources: Sequence[Source],
                 max_frames: Optional[int]) -> Optional[int]:
    """How many frames :func:`iter_frames` yields at most (None for a
    webcam without ``max_frames``)."""
    total = 0
    for src in sources:
        if src.kind in ('image', 'array'):
            total += 1
        elif src.kind == 'webcam':
            return max_frames
        else:
            cap = cv2.VideoCapture(src.path)
            n = int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) if \
                cap.isOpened() else 0
            cap.release()
            total += min(n, max_frames) if max_frames else n
    return total
