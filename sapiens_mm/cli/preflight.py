"""The checks of the inference command line that run before torch and the
OpenMMLab packages load (seconds), so that a mistyped model name, a missing
file, a folder without images or ``--show`` without a display is refused at
once, in one line.

Only the standard library, the task names (:mod:`sapiens_mm.tasks`), the
model registry (:mod:`sapiens_mm.zoo.cards`: the metafiles, read with YAML)
and the input names (:mod:`sapiens_mm.utils.media_names`) are used; OpenCV
only for ``--show`` on a machine with a display. What needs a model or a
file's contents (the task of a checkpoint, whether its weights fit) is
checked when the models are built.
"""
import json
import os
import os.path as osp
from typing import Dict, Optional

from sapiens_mm.tasks import CLI_TASKS
from sapiens_mm.utils.display import display_problem
from sapiens_mm.utils.media_names import (IMAGE_EXTENSIONS, VIDEO_EXTENSIONS,
                                          looks_like_model_path, webcam_index)
from sapiens_mm.zoo.cards import lookup_card, unknown_model_error

__all__ = [
    'check_input', 'check_model', 'check_file', 'load_bboxes',
    'model_options', 'preflight'
]


def _folder_media(folder: str) -> str:
    """``'image'`` when ``folder`` holds an image (:data:`IMAGE_EXTENSIONS`)
    at any depth (the walk stops at the first), else ``'video'`` when it
    holds a video, else ``''``."""
    found = ''
    for _, _, names in os.walk(folder, followlinks=True):
        for name in names:
            if name.lower().endswith(IMAGE_EXTENSIONS):
                return 'image'
            if name.lower().endswith(VIDEO_EXTENSIONS):
                found = 'video'
    return found


def check_input(text: str) -> None:
    """Refuse an input of one process's run (not a list file or glob) that
    is neither an existing file nor a folder holding an image nor a webcam.

    Raises:
        FileNotFoundError: No such file or folder.
        ValueError: A folder without images.
    """
    path = osp.expanduser(text)
    if osp.isdir(path):
        media = _folder_media(path)
        if media != 'image':
            videos = (' (the videos in it are not read from a folder: give '
                      'each video file)' if media == 'video' else '')
            raise ValueError(
                f'Input folder {text} holds no image '
                f'({", ".join(IMAGE_EXTENSIONS)}) at any depth{videos}; give '
                'a folder of images, an image or video file, or a webcam '
                'index.')
    elif not osp.isfile(path) and webcam_index(text) is None:
        raise FileNotFoundError(
            f'Input not found: {text} (no such file or folder). Give an '
            'image, video or folder path, a list file (.txt / .lst / '
            '.jsonl), a quoted glob, or a webcam index (0, webcam, '
            'webcam:1).')


def check_model(text: str, option: str) -> None:
    """Refuse a model option's value that is neither a file or folder nor a
    model of the registry (by name, alias or Hub repository id, with an
    optional ``@revision``; ``hf://`` URLs are checked when fetched).

    Args:
        text: The value.
        option: The option, for the message (``'--pose'``).

    Raises:
        FileNotFoundError: A path that does not exist.
        UnknownModelError: Neither a file nor a registry model (the
            closest names are suggested).
    """
    if osp.exists(osp.expanduser(text)) or text.startswith('hf://') or \
            lookup_card(text.partition('@')[0]) is not None:
        return
    if looks_like_model_path(text):
        raise FileNotFoundError(f'{option} {text}: no such file.')
    raise unknown_model_error(
        f'{option} {text}: neither a file nor a released model', text)


def check_file(text: Optional[str], option: str) -> None:
    """Refuse a config or checkpoint option naming a file that does not
    exist.

    Raises:
        FileNotFoundError: No such file.
    """
    if text is not None and not osp.isfile(osp.expanduser(text)):
        raise FileNotFoundError(f'{option} {text}: no such file.')


def load_bboxes(text: Optional[str]):
    """The boxes of ``--bboxes``: a JSON file or a JSON string (None when
    not given).

    Raises:
        ValueError: Neither valid JSON nor a file of it.
    """
    if text is None:
        return None
    if osp.isfile(text):
        try:
            with open(text, encoding='utf-8') as f:
                return json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(
                f'--bboxes file {text} is not valid JSON ({e}); write '
                '[[x1, y1, x2, y2], ...] in pixels.') from None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise ValueError(f'--bboxes is neither a file nor JSON: {text!r}.'
                         ) from None


def model_options(args) -> Dict[str, dict]:
    """``{task: dict(config=..., checkpoint=...)}`` of the per-task model
    options (``--pose CKPT``, ``--pose-config CFG``, ...; not
    ``--checkpoints``, whose tasks are read from the files).

    Raises:
        ValueError: No model option at all.
    """
    models = {}
    for task in CLI_TASKS:
        ckpt = getattr(args, task)
        cfg = getattr(args, f'{task}_config')
        if ckpt is not None or cfg is not None:
            models[task] = dict(config=cfg, checkpoint=ckpt)
    if not models and not args.checkpoints:
        raise ValueError('No model given: use --checkpoints CKPT [CKPT ...] '
                         'or --pose/--seg/--depth/--normal/--pointmap/'
                         '--albedo/--matting CKPT (and/or '
                         '--<task>-config CFG).')
    return models


def preflight(args, sharded: bool) -> None:
    """Every check of the parsed command that needs no model: the model
    options (files and names), the other files named, ``--bboxes``, the
    inputs (those of one process's run; a sharded run reads its list files
    and globs as it goes) and ``--show``.

    Args:
        args: The parsed options of :func:`sapiens_mm.cli.infer.build_parser`.
        sharded: Whether the command runs sharded.

    Raises:
        ValueError, FileNotFoundError, RuntimeError: The first problem, in
            one line that says what to do.
    """
    for task, spec in model_options(args).items():
        if spec['checkpoint'] is not None:
            check_model(spec['checkpoint'], f'--{task}')
        check_file(spec['config'], f'--{task}-config')
    for ckpt in args.checkpoints:
        check_model(ckpt, '--checkpoints')
    check_file(args.det_model, '--det-model')
    check_file(args.det_weights, '--det-weights')
    load_bboxes(args.bboxes)
    if sharded:
        return
    for text in args.inputs:
        check_input(text)
    if args.show:  # before any model loads: Qt aborts without a display
        problem = display_problem()
        if problem:
            raise RuntimeError(
                f'--show needs a window, but {problem}. Run without --show: '
                f'the results are written to --out-dir ({args.out_dir}).')
