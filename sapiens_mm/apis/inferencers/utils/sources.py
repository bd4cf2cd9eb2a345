"""Inputs of the inferencers: images, folders, arrays, videos and webcams,
and for runs at scale list files and globs.

:func:`collect_sources` turns what the user gave into :class:`Source`
entries (one per image file, array, video or webcam) with unique output
names; :func:`iter_frames` decodes them into :class:`Frame` objects, one
per image or video frame. :func:`iter_sources` yields the same sources
lazily, one at a time, for a folder tree, a list file or a glob of any size
(the sharded runs of :mod:`sapiens_mm.engine.sharded`).
"""
import array
import glob
import json
import os
import os.path as osp
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import (Callable, Dict, Iterator, List, Optional, Sequence, Tuple,
                    Union)

import cv2
import numpy as np
from mmengine.logging import print_log

from sapiens_mm.utils.image_io import (IMAGE_EXTENSIONS, VIDEO_EXTENSIONS,
                                       ImageTooLargeError,
                                       UnreadableImageError, check_image_size,
                                       read_image, walk_files)
from sapiens_mm.utils.sharded_names import name_hash
from sapiens_mm.utils.media_names import (LIST_EXTENSIONS, is_glob,
                                          is_list_file, webcam_index)

__all__ = [
    'InputType', 'InputsType', 'Source', 'Frame', 'check_array',
    'collect_sources', 'unique_names', 'iter_frames', 'count_frames',
    'LIST_EXTENSIONS', 'is_list_file', 'is_glob', 'iter_sources'
]

_MEDIA_EXTENSIONS = IMAGE_EXTENSIONS + VIDEO_EXTENSIONS

InputType = Union[str, Path, np.ndarray, int]
InputsType = Union[InputType, Sequence[InputType]]
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
            index (``0``, ``'0'``, ``'webcam'``, ``'webcam:1'``), a
            :class:`Source` of :func:`iter_sources` (kept as it is) or a
            list of these. Folders are searched recursively for images.

    Returns:
        One source per image (of a folder too), array, video or webcam.

    Raises:
        FileNotFoundError: A path that does not exist.
        ValueError: A folder without images, or a bad array.
        TypeError: An input of another type.
    """
    if isinstance(inputs, (str, Path, np.ndarray, int, Source)):
        inputs = [inputs]
    sources: List[Source] = []
    for index, item in enumerate(inputs):
        if isinstance(item, Source):  # named already (iter_sources)
            sources.append(replace(item, index=index))
            continue
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
        elif (cam := webcam_index(str(item))) is not None:
            sources.append(_webcam(cam, index))
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


def _kind(path: str) -> str:
    return 'video' if path.lower().endswith(VIDEO_EXTENSIONS) else 'image'


def _folder_sources(folder: str, rel_dir: str, names: Sequence[str],
                    index: int) -> List[Source]:
    """Sources of the files ``names`` of one folder, named as
    :func:`collect_sources` names a folder's files: ``<rel_dir>/<stem>``,
    same stems made unique (``x``, ``x_1``...) in sorted file name order."""
    prefix = '' if rel_dir in ('.', '') else rel_dir + '/'
    sources = [
        Source(_kind(n), prefix + osp.splitext(n)[0], index,
               path=osp.join(folder, n)) for n in sorted(names)
    ]
    unique_names(sources)
    return sources


class _SiblingNames:
    """``{file name: output name}`` of the images and videos of a folder
    (:func:`_folder_sources`), for list / glob entries that share their stem
    with another file; the last 16 folders of one listing are kept, as such
    entries usually come together (nothing outlives the listing)."""

    def __init__(self, size: int = 16) -> None:
        self._size = size
        self._folders: 'OrderedDict[Tuple[str, str], Dict[str, str]]' = \
            OrderedDict()

    def get(self, folder: str, rel_dir: str) -> Dict[str, str]:
        key = (folder, rel_dir)
        if key in self._folders:
            self._folders.move_to_end(key)
            return self._folders[key]
        try:
            names = [e.name for e in os.scandir(folder)
                     if e.name.lower().endswith(_MEDIA_EXTENSIONS)]
        except OSError:
            names = []
        found = {osp.basename(s.path): s.name
                 for s in _folder_sources(folder, rel_dir, names, 0)}
        self._folders[key] = found
        if len(self._folders) > self._size:
            self._folders.popitem(last=False)
        return found


class _NameSet:
    """The output names a listing gave so far, as 64-bit hashes
    (:func:`~sapiens_mm.utils.sharded_names.name_hash`) in an
    open-addressing table: at most 16 bytes per name (a million-entry list
    costs 16 MB, a Python set of the same hashes about 70 MB)."""

    def __init__(self) -> None:
        self._table = array.array('Q', bytes(8 * 1024))
        self._size = 0

    def add(self, name: str) -> bool:
        """Record ``name``; False if it was recorded already."""
        if 2 * (self._size + 1) > len(self._table):
            old = self._table
            self._table = array.array('Q', bytes(16 * len(old)))
            for h in old:
                if h:
                    self._insert(h)
        if not self._insert(name_hash(name) or 1):  # 0 marks a free slot
            return False
        self._size += 1
        return True

    def _insert(self, h: int) -> bool:
        table = self._table
        mask = len(table) - 1
        i = h & mask
        while table[i]:
            if table[i] == h:
                return False
            i = (i + 1) & mask
        table[i] = h
        return True


def _unique(src: 'Source', seen: _NameSet, where: str) -> 'Source':
    """``src``, renamed when an earlier entry of the listing has its name:
    the smallest free ``_1``, ``_2``... suffix (logged), so that no output
    overwrites another's."""
    if seen.add(src.name):
        return src
    n = 1
    while not seen.add(f'{src.name}_{n}'):
        n += 1
    old, src.name = src.name, f'{src.name}_{n}'
    print_log(f'{where}: {src.path} has the output name {old!r} of an '
              f'earlier entry; its outputs are named {src.name!r}.',
              logger='current', level=30)
    return src


def _entry_source(path: str, rel: str, index: int,
                  siblings: _SiblingNames) -> Source:
    """The source of one list / glob entry: named by ``rel``, its path
    relative to the list's / glob's folder (:func:`_relative`), without the
    extension; a file sharing its stem with other images / videos of its
    folder is named as a folder walk names it."""
    rel_dir, file_name = osp.split(rel)
    stem, ext = osp.splitext(file_name)
    name = f'{rel_dir}/{stem}' if rel_dir else stem
    if not osp.isfile(path):  # fails when read; no folder to look at
        return Source(_kind(path), name, index, path=path)
    folder = osp.dirname(path) or '.'
    for other in _MEDIA_EXTENSIONS:
        if other == ext.lower():
            continue
        if (osp.exists(osp.join(folder, stem + other))
                or osp.exists(osp.join(folder, stem + other.upper()))):
            name = siblings.get(folder, rel_dir).get(file_name, name)
            break
    return Source(_kind(path), name, index, path=path)


def _relative(path: str, base: str) -> str:
    """``path`` relative to ``base`` with ``/`` separators; a path outside
    ``base``: its absolute path without the root (never ``..``, so that no
    output name leaves the output folder)."""
    rel = osp.relpath(path, base)
    if rel == '..' or rel.startswith('..' + os.sep):
        rel = osp.splitdrive(osp.abspath(path))[1].lstrip(os.sep)
    return rel.replace(os.sep, '/')


def _list_entries(list_file: str) -> Iterator[Tuple[str, str]]:
    """``(path, relative path)`` of each entry of a list file, one line at
    a time (blank lines and ``#`` comments skipped; relative paths are
    relative to the list's folder)."""
    base = osp.dirname(osp.abspath(list_file))
    jsonl = list_file.lower().endswith('.jsonl')
    with open(list_file, encoding='utf-8') as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            if jsonl:
                try:
                    entry = json.loads(line)
                    path = entry['path'] if isinstance(entry, dict) else entry
                except (ValueError, KeyError, TypeError):
                    path = None
                if not isinstance(path, str):
                    raise ValueError(
                        f'{list_file}:{n}: expected a JSON string or an '
                        'object with a "path" string; fix or remove the '
                        'line.')
                line = path
            line = osp.expanduser(line)
            path = osp.join(base, line)
            rel = osp.normpath(line)
            if osp.isabs(rel) or rel == '..' or rel.startswith('..' + os.sep):
                rel = _relative(path, base)
            yield path, rel.replace(os.sep, '/')


def _glob_base(pattern: str) -> str:
    """The folder part of ``pattern`` before its first wildcard."""
    parts = Path(pattern).parts
    fixed = []
    for part in parts[:-1]:
        if glob.has_magic(part):
            break
        fixed.append(part)
    return str(Path(*fixed)) if fixed else '.'


def iter_sources(inputs: Sequence[str],
                 exclude: Sequence[str] = ()) -> Iterator[Source]:
    """The image and video sources of ``inputs``, one at a time, without
    listing them all first (a folder tree of millions of files or a list
    file of millions of lines is read in bounded memory).

    Names are those :func:`collect_sources` gives, decided from the entry,
    its folder and (for a list or a glob) the names of the entries before
    it, so that the same listing always names an entry the same way (what
    a resumed sharded run relies on):

    * a folder: walked depth-first in sorted order (images, as
      :func:`collect_sources`), named by their path relative to it without
      the extension; files of one folder with the same stem become ``x``,
      ``x_1``...;
    * a list file (:data:`LIST_EXTENSIONS`): its entries (images or
      videos; missing or unreadable ones are yielded too, and fail when
      read), named by their path relative to the list's folder (entries
      outside it: their absolute path without the root); an entry whose
      name an earlier entry has (``a/x.png`` beside the list and
      ``/a/x.png``, or one file listed twice) gets the smallest free
      ``_1``, ``_2``... suffix, and a log line says so;
    * a glob (``data/**/*.jpg``): its matching image and video files, named
      by their path relative to the folder before the first wildcard (made
      unique as a list's);
    * image and video files: named by their stem, made unique among them.

    Args:
        inputs: Either one folder, list file or glob, or image / video
            files (several large inputs could give two entries one name:
            run them separately or list them in one file).
        exclude: Folders whose contents a folder walk skips (the output
            folder).

    Yields:
        :class:`Source` objects (kind ``'image'`` or ``'video'``).

    Raises:
        ValueError: Several folders / lists / globs, or one mixed with
            files; a bad ``.jsonl`` line.
        FileNotFoundError: A file or folder that does not exist.
    """
    inputs = [osp.expanduser(str(i)) for i in inputs]
    big = [i for i in inputs if osp.isdir(i) or is_list_file(i) or is_glob(i)]
    if big and len(inputs) > 1:
        raise ValueError(
            'A sharded run takes one folder, list file or glob, or image / '
            f'video files; got {len(inputs)} inputs including {big[0]}. Put '
            'all the paths in one list file, or run them separately.')
    if not big:
        for path in inputs:
            if not osp.isfile(path):
                raise FileNotFoundError(
                    f'Input not found: {path}. Give a folder, a list file '
                    f'({", ".join(LIST_EXTENSIONS)}), a glob, or image / '
                    'video files.')
        sources = [Source(_kind(p), osp.splitext(osp.basename(p))[0], i,
                          path=p) for i, p in enumerate(inputs)]
        unique_names(sources)
        yield from sources
        return
    spec = big[0]
    if osp.isdir(spec):
        for rel_dir, names in walk_files(spec, IMAGE_EXTENSIONS, exclude):
            folder = spec if rel_dir == '.' else osp.join(spec, rel_dir)
            yield from _folder_sources(folder, rel_dir, names, 0)
        return
    # A list (or a glob) can name two files alike (``a/x.png`` relative
    # to the list, ``/a/x.png``; an entry listed twice): the later is
    # renamed (_unique). A folder walk's names are unique as they are.
    seen, siblings = _NameSet(), _SiblingNames()
    if is_list_file(spec):
        for path, rel in _list_entries(spec):
            yield _unique(_entry_source(path, rel, 0, siblings), seen, spec)
    else:
        base = _glob_base(spec)
        for path in glob.iglob(spec, recursive=True):
            if path.lower().endswith(_MEDIA_EXTENSIONS) and osp.isfile(path):
                yield _unique(
                    _entry_source(path, _relative(path, base), 0, siblings),
                    seen, spec)
