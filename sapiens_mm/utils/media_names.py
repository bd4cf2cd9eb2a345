"""What the inputs of the inferencers are named by: the file name endings of
images, videos, list files and model files, globs and webcam names.

Kept here, with the standard library only, so that a command line can check
its inputs before torch and the OpenMMLab packages load
(:mod:`sapiens_mm.cli.preflight`); the readers
(:mod:`sapiens_mm.utils.image_io`,
:mod:`sapiens_mm.apis.inferencers.utils.sources`) use the same names.
"""
import glob
import os
import os.path as osp
import re
from pathlib import Path
from typing import Optional, Tuple

__all__ = [
    'IMAGE_EXTENSIONS', 'VIDEO_EXTENSIONS', 'LIST_EXTENSIONS',
    'CHECKPOINT_EXTENSIONS', 'is_list_file', 'is_glob', 'webcam_index',
    'looks_like_model_path'
]

#: File name endings (case-insensitive) treated as images.
IMAGE_EXTENSIONS: Tuple[str, ...] = ('.jpg', '.jpeg', '.png', '.bmp', '.tif',
                                     '.tiff', '.webp')
#: File name endings (case-insensitive) treated as videos.
VIDEO_EXTENSIONS: Tuple[str, ...] = ('.mp4', '.avi', '.mov', '.mkv', '.webm',
                                     '.m4v', '.mpg', '.mpeg', '.wmv')
#: File name endings of list files (one input path per line; ``.jsonl``:
#: one JSON string or ``{"path": ...}`` object per line).
LIST_EXTENSIONS: Tuple[str, ...] = ('.txt', '.lst', '.jsonl')
#: File name endings of model files: checkpoints and exported models (a
#: name with one of them is a path, not a model name).
CHECKPOINT_EXTENSIONS: Tuple[str, ...] = ('.pth', '.pt', '.pt2', '.ckpt',
                                          '.bin', '.safetensors', '.onnx')
#: A webcam input: ``webcam``, ``webcam:N`` or a bare camera index.
_WEBCAM = re.compile(r'^(webcam(:(?P<a>\d+))?|(?P<b>\d+))$')


def looks_like_model_path(text: str) -> bool:
    """Whether a model option's value is a path rather than a model name:
    a file name ending of a model file, a leading ``/``, ``.`` or ``~``, or
    a folder part (a Hub repository id ``org/name`` aside, unless ``org``
    is a folder here)."""
    parts = text.replace(os.sep, '/').split('/')
    return (text.lower().endswith(CHECKPOINT_EXTENSIONS)
            or text.startswith(('/', '.', '~')) or len(parts) > 2
            or (len(parts) == 2 and osp.isdir(parts[0])))


def is_list_file(spec) -> bool:
    """Whether an input is a list file (:data:`LIST_EXTENSIONS`)."""
    return (isinstance(spec, (str, Path)) and osp.isfile(str(spec))
            and str(spec).lower().endswith(LIST_EXTENSIONS))


def is_glob(spec) -> bool:
    """Whether an input is a glob pattern (``*``, ``?``, ``[...]``; ``**``
    matches folders recursively) rather than an existing path."""
    return (isinstance(spec, (str, Path)) and glob.has_magic(str(spec))
            and not osp.exists(str(spec)))


def webcam_index(text: str) -> Optional[int]:
    """The camera index of a webcam name (``'0'``, ``'webcam'``,
    ``'webcam:1'``), or None for anything else."""
    m = _WEBCAM.match(str(text))
    return None if m is None else int(m.group('a') or m.group('b') or 0)
