"""Browser demo of :class:`~sapiens_mm.apis.SapiensInferencer` (gradio).

Upload an image (or take a webcam snapshot), choose the tasks and, per task,
a checkpoint, and get the results at the page's full width, two per row,
each with its key (part legend, depth colour bar, normal sphere), plus every
output file for download (pose JSON and its exported formats, ``.npy``
maps, PNGs, the foreground mask and cut-outs). Without checkpoints each
task offers the shipped tiny-arch config with random weights, so the demo
starts on a fresh machine with nothing downloaded (the results then show
the pipeline, not a trained model).

``demo/web_demo.py`` is the command line; :func:`build_demo` returns the
``gradio.Blocks`` app for embedding.
"""
import os
import os.path as osp
import shutil
import tempfile
import threading
import traceback
from collections import OrderedDict
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import cv2
import numpy as np
from mmengine.logging import print_log

from sapiens_mm.apis.inferencers import task_of_checkpoint
from sapiens_mm.cli.common import one_line
from sapiens_mm.tasks import CLI_TASKS, TASK_VERSIONS
from sapiens_mm.utils.media_names import CHECKPOINT_EXTENSIONS
from sapiens_mm.zoo import (ConfigMismatchError, lookup_card,
                            shipped_config)

__all__ = ['TINY_CHOICE', 'DEMO_TASKS', 'find_checkpoints', 'side_by_side',
           'WebDemo', 'build_demo']

#: Model choice that builds the shipped tiny config with random weights.
TINY_CHOICE = 'tiny (random weights, no download)'
#: Tasks in the order their panels appear: those of the Sapiens (v1)
#: models and Sapiens2's matting, whose tiny configs the demo offers
#: without checkpoints (matting's is the Sapiens2 one).
DEMO_TASKS: Tuple[str, ...] = tuple(
    t for t in CLI_TASKS if 1 in TASK_VERSIONS[t] or t == 'matting')
_PANEL_HEIGHT = 512


def find_checkpoints(paths: Sequence[str]) -> Dict[str, Dict[str, str]]:
    """Checkpoints per task among files and folders (searched recursively).

    The task of each file is recognised as the CLI does (an exported
    model's metadata, the config a checkpoint carries as data, its official
    file name or its weights); files that cannot be read or whose task
    cannot be told are logged and left out. A released model's registry
    name (``sapiens2-pose-0.4b``) is offered under that name and downloaded
    when it is first chosen.

    Returns:
        ``{task: {label: path or model name}}``: a released model under its
        name, a file under its path from the folder given, that folder's
        name included (``demo/seg/iter_300.pth`` for ``work_dirs/demo``), or
        its folder and name when the file itself was given.
    """
    found: Dict[str, Dict[str, str]] = {t: {} for t in DEMO_TASKS}
    files: List[Tuple[Path, str]] = []
    for text in paths:
        path = Path(text).expanduser()
        card = None if path.exists() else lookup_card(text)
        if card is not None and card.runnable and card.task in found:
            # a released model: downloaded when it is first chosen
            found[card.task][card.name] = card.name
        elif path.is_dir():
            root = path.resolve()
            files += [(p, (Path(root.name) / p.relative_to(path)).as_posix())
                      for p in sorted(path.rglob('*'))
                      if p.suffix.lower() in CHECKPOINT_EXTENSIONS]
        elif path.is_file():
            files.append((path, (Path(path.resolve().parent.name)
                                 / path.name).as_posix()))
        else:
            raise FileNotFoundError(f'Checkpoint path not found: {path}')
    for f, label in files:
        try:
            task = task_of_checkpoint(f)
        except Exception as e:  # noqa: BLE001 (unreadable: left out, said)
            print_log(f'Web demo: skipped {f}: {one_line(e)}',
                      logger='current', level=30)
            continue
        if task in found:
            found[task][label] = str(f)
    return found


def _read_upload(path: str) -> np.ndarray:
    """The uploaded image (BGR), refused before decoding when it is over
    the size limits (:func:`~sapiens_mm.utils.image_io.read_image`)."""
    from sapiens_mm.utils.image_io import (ImageTooLargeError,
                                           UnreadableImageError, read_image)
    name = osp.basename(path)
    try:
        return read_image(path, backend='cv2')
    except ImageTooLargeError as e:
        raise ValueError(str(e).replace(path, name)) from None
    except UnreadableImageError:
        raise ValueError(
            f'{name} is not an image that can be read: upload a JPEG, PNG, '
            'BMP, TIFF or WebP photo.') from None


def _matting_background(text: str, upload: Optional[str]):
    """What the matting composite goes onto: the uploaded image, else the
    colour typed in, else None (green screen).

    The text is only ever read as a colour, never as a path: files on the
    server are not the visitor's, and a message that differed for files
    that exist would tell which do.
    """
    if upload:
        return _read_upload(upload)
    text = (text or '').strip()
    if not text:
        return None
    from sapiens_mm.utils.matting import COLORS, parse_color
    try:
        return parse_color(text)
    except ValueError:
        raise ValueError(  # the text is not repeated: one message for all
            'The matting background is not a colour: give a name '
            f'({", ".join(sorted(COLORS))}), #RRGGBB or R,G,B (0-255), or '
            'upload a background image.') from None


def _panel(img: np.ndarray, title: str) -> np.ndarray:
    """``img`` (BGR) scaled to the panel height, with a title bar."""
    h, w = img.shape[:2]
    width = max(1, int(round(w * _PANEL_HEIGHT / h)))
    body = cv2.resize(img, (width, _PANEL_HEIGHT),
                      interpolation=cv2.INTER_AREA)
    bar = np.full((28, width, 3), 32, np.uint8)
    cv2.putText(bar, title, (6, 20), cv2.FONT_HERSHEY_SIMPLEX, 0.6,
                (255, 255, 255), 1, cv2.LINE_AA)
    return np.concatenate([bar, body], axis=0)


def side_by_side(panels: Sequence[Tuple[str, np.ndarray]],
                 per_row: int = 2, max_width: int = 1800) -> np.ndarray:
    """Panels (title, BGR image), up to ``per_row`` next to each other while
    a row stays within ``max_width`` pixels, 8 px apart, rows 8 px apart,
    on white (BGR).

    Each panel is 512 px high (plus its title bar) with its key (part
    legend, depth colour bar, normal sphere) and caption at the same scale
    as the image: two portrait or photo panels per row keep the image about
    as wide as a browser page shows it at full width, and a wide image
    gets a row of its own, so the keys stay readable (they are sized for
    wide images too: :func:`~sapiens_mm.visualization.legend.display_size`).
    """
    gap = 8
    scaled = [_panel(img, title) for title, img in panels]
    groups: List[List[np.ndarray]] = []
    for panel in scaled:
        row = groups[-1] if groups else None
        if row is None or len(row) == per_row or sum(
                p.shape[1] + gap for p in row) + panel.shape[1] > max_width:
            groups.append([panel])
        else:
            row.append(panel)
    rows = []
    for group in groups:
        height = max(p.shape[0] for p in group)
        parts = []
        for i, panel in enumerate(group):
            if i:
                parts.append(np.full((height, gap, 3), 255, np.uint8))
            parts.append(np.pad(panel, ((0, height - panel.shape[0]), (0, 0),
                                        (0, 0)), constant_values=255))
        rows.append(np.concatenate(parts, axis=1))
    width = max(r.shape[1] for r in rows)
    out = []
    for i, row in enumerate(rows):
        if i:
            out.append(np.full((gap, width, 3), 255, np.uint8))
        pad = np.full((row.shape[0], width - row.shape[1], 3), 255, np.uint8)
        out.append(np.concatenate([row, pad], axis=1))
    return np.concatenate(out, axis=0)


class WebDemo:
    """The demo's state: the available checkpoints, built inferencers (the
    two most recent model choices are kept) and the output folder.

    Args:
        checkpoints: ``{task: {label: path}}`` (see :func:`find_checkpoints`).
        device: Inference device (None: CUDA when available).
        out_root: Folder for the per-request outputs (default: a new
            temporary folder).
        max_side: Larger inputs are scaled down to this many pixels on
            their long side first. Defaults to 1280.
        configs: ``{task: config file}``: the config of that task's
            checkpoints (for checkpoints that carry none; see
            :func:`~sapiens_mm.zoo.checkpoint_config`), also
            offered alone with random weights.
    """

    def __init__(self,
                 checkpoints: Optional[Dict[str, Dict[str, str]]] = None,
                 device: Optional[str] = None,
                 out_root: Optional[str] = None,
                 max_side: int = 1280,
                 configs: Optional[Dict[str, str]] = None) -> None:
        unknown = set(configs or {}) - set(DEMO_TASKS)
        if unknown:
            raise ValueError(f'configs for unknown task(s) {sorted(unknown)};'
                             f' the tasks are {", ".join(DEMO_TASKS)}.')
        self.configs = dict(configs or {})
        for task, path in self.configs.items():
            if not osp.isfile(path):
                raise FileNotFoundError(f'{task} config not found: {path}')
        self.checkpoints = {t: dict((checkpoints or {}).get(t, {}))
                            for t in DEMO_TASKS}
        self.device = device
        self.out_root = out_root or tempfile.mkdtemp(prefix='sapiens_web_')
        self.max_side = int(max_side)
        self._inferencers: 'OrderedDict[tuple, object]' = OrderedDict()
        self._lock = threading.Lock()
        self._runs = 0

    def _config_choice(self, task: str) -> Optional[str]:
        if task not in self.configs:
            return None
        return f'{osp.basename(self.configs[task])} (random weights)'

    def choices(self, task: str) -> List[str]:
        """Model choices of a task: its checkpoints, its config alone (when
        given), then the tiny model."""
        config = self._config_choice(task)
        return list(self.checkpoints[task]) + ([config] if config else []) \
            + [TINY_CHOICE]

    def _spec(self, task: str, choice: str):
        if choice in self.checkpoints[task]:
            return dict(config=self.configs.get(task),
                        checkpoint=self.checkpoints[task][choice])
        if choice is not None and choice == self._config_choice(task):
            return dict(config=self.configs[task], checkpoint=None)
        version = 1 if 1 in TASK_VERSIONS[task] else 2
        return dict(config=str(shipped_config(task, 'tiny', version=version)),
                    checkpoint=None)

    def inferencer(self, choices: Dict[str, str]):
        """The inferencer of ``{task: model choice}`` (built once)."""
        from sapiens_mm.apis.inferencers import SapiensInferencer
        key = tuple(sorted(choices.items()))
        if key not in self._inferencers:
            models = {t: self._spec(t, c) for t, c in choices.items()}
            self._inferencers[key] = SapiensInferencer(
                models=models, device=self.device)
            while len(self._inferencers) > 2:
                self._inferencers.popitem(last=False)
        self._inferencers.move_to_end(key)
        return self._inferencers[key]

    def run(self, upload: Optional[str], webcam: Optional[np.ndarray],
            tasks: Sequence[str], model_choices: Dict[str, str],
            skeleton_style: str = 'mmpose',
            export_formats: Sequence[str] = (),
            save_mask: bool = False,
            background: str = '',
            background_image: Optional[str] = None
            ) -> Tuple[Optional[np.ndarray], List[str], str]:
        """One request.

        Args:
            upload: Path of the uploaded file, or None.
            webcam: (H, W, 3) RGB webcam snapshot, or None (the upload wins
                when both are given).
            tasks: Tasks to run.
            model_choices: ``{task: choice}`` (see :meth:`choices`).
            skeleton_style: ``'mmpose'`` or ``'openpose'``.
            export_formats: Extra pose formats to write.
            save_mask: Write the foreground mask and cut-outs (needs seg).
            background: The colour the matting composite puts behind the
                person (a name, ``#RRGGBB`` or ``R,G,B``; '': green screen;
                ignored without matting). Never read as a path.
            background_image: Path of an uploaded background image (wins
                over ``background``), or None.

        Returns:
            ``(overlays, files, status)``: the results as one RGB image (None
            on error), the output files, and a Markdown status line (the
            error, said plainly, when there is one).
        """
        try:
            if upload:
                img = _read_upload(upload)
                name = osp.splitext(osp.basename(upload))[0]
            elif webcam is not None:
                from sapiens_mm.utils.image_io import check_image_size
                webcam = np.asarray(webcam)
                check_image_size(webcam.shape[1], webcam.shape[0],
                                 'The webcam snapshot')
                img = np.ascontiguousarray(webcam[..., :3][..., ::-1])
                name = 'webcam'
            else:
                raise ValueError('Upload an image or take a webcam snapshot '
                                 'first.')
            if not tasks:
                raise ValueError('Choose at least one task.')
            matte_bg = _matting_background(background, background_image) \
                if 'matting' in tasks else None
            scale = self.max_side / max(img.shape[:2])
            if scale < 1:
                img = cv2.resize(img, None, fx=scale, fy=scale,
                                 interpolation=cv2.INTER_AREA)
            with self._lock:
                out_dir = self._new_run_dir()
                # the input as a file: the outputs are named after it
                path = osp.join(out_dir, 'input', name + '.png')
                os.makedirs(osp.dirname(path), exist_ok=True)
                cv2.imwrite(path, img)
                inferencer = self.inferencer(
                    {t: model_choices.get(t, TINY_CHOICE) for t in tasks})
                result = inferencer(
                    path, out_dir=out_dir, return_vis=True,
                    show_progress=False, skeleton_style=skeleton_style,
                    export_formats=tuple(export_formats),
                    save_mask=save_mask,
                    background=matte_bg)[0]
                files = self._downloads(out_dir)
        except Exception as e:  # noqa: BLE001 (any failure: said in the page)
            if isinstance(e, ConfigMismatchError):  # in this demo's words
                e = ValueError(e.explain(
                    f'start the web demo with --{e.task}-config CFG'))
            detail = one_line(e) if isinstance(e, (ValueError, OSError)) \
                else traceback.format_exc()  # a user error needs no trace
            print_log(f'Web demo request failed: {detail}', logger='current',
                      level=30)
            return None, [], f'**Error:** {one_line(e)}'
        vis = result['visualization']
        panels = [('input', img)] + [(t, vis[t]) for t in DEMO_TASKS
                                     if t in vis]
        panels += [(t, v) for t, v in vis.items() if t not in DEMO_TASKS]
        shape = 'x'.join(map(str, img.shape[1::-1]))
        status = (f'Ran {", ".join(t for t in DEMO_TASKS if t in tasks)} on '
                  f'{name} ({shape}); {len(files)} file(s) to download.')
        # what the command line says in its log (the detector found no one,
        # no keypoint above the threshold), here in the page
        status += ''.join(f'\n\n**Note:** {message}'
                          for message in inferencer.notices.values())
        return side_by_side(panels)[..., ::-1], files, status

    def _new_run_dir(self) -> str:
        """A new, empty ``run_NNNN`` folder under the output root: the
        first free number (a restarted demo with the same ``--out-dir``
        continues after the runs already there)."""
        os.makedirs(self.out_root, exist_ok=True)
        while True:
            self._runs += 1
            out_dir = osp.join(self.out_root, f'run_{self._runs:04d}')
            try:
                os.mkdir(out_dir)
            except FileExistsError:
                continue
            return out_dir

    @staticmethod
    def _downloads(out_dir: str) -> List[str]:
        """The run's files under distinct names (``<folder>_<file>``, e.g.
        ``pose_photo.json``, ``depth_photo.png``) in ``<out_dir>/downloads``
        (hard links where possible)."""
        root = Path(out_dir)
        dst = root / 'downloads'
        dst.mkdir(exist_ok=True)
        out = []
        for p in sorted(root.rglob('*')):
            if not p.is_file() or dst in p.parents:
                continue
            link = dst / '_'.join(p.relative_to(root).parts)
            try:
                os.link(p, link)
            except OSError:
                shutil.copyfile(p, link)
            out.append(str(link))
        return out

    def build(self):
        """The gradio app."""
        import gradio as gr

        from sapiens_mm.datasets.keypoint_formats import EXPORT_FORMATS
        with gr.Blocks(title='Sapiens demo', analytics_enabled=False) as app:
            gr.Markdown(
                '# Sapiens: pose, body parts, depth, normals, matting\n'
                'Upload an image or take a webcam snapshot, choose tasks '
                'and models, press **Run**. Models marked *tiny* have random '
                'weights: they show the pipeline, not real predictions.')
            # the controls in a row, the results below at full width
            with gr.Row():
                with gr.Column(scale=1):
                    upload = gr.File(label='Image', file_count='single',
                                     type='filepath', elem_id='upload')
                    webcam = gr.Image(label='or a webcam snapshot',
                                      sources=['webcam'], type='numpy',
                                      elem_id='webcam', height=240)
                with gr.Column(scale=1):
                    tasks = gr.CheckboxGroup(
                        list(DEMO_TASKS), value=['pose', 'seg'],
                        label='Tasks', elem_id='tasks')
                    models = [
                        gr.Dropdown(self.choices(t),
                                    value=self.choices(t)[0],
                                    label=f'{t} model', elem_id=f'model_{t}')
                        for t in DEMO_TASKS
                    ]
                with gr.Column(scale=1):
                    style = gr.Radio(['mmpose', 'openpose'], value='mmpose',
                                     label='Skeleton style',
                                     elem_id='skeleton_style')
                    formats = gr.CheckboxGroup(
                        list(EXPORT_FORMATS), value=[],
                        label='Also export pose as', elem_id='formats')
                    mask = gr.Checkbox(
                        label='Foreground mask and cut-outs (needs seg)',
                        value=False, elem_id='save_mask')
                    background = gr.Textbox(
                        label='Matting background (colour name, #RRGGBB '
                        'or R,G,B; empty: green screen)', value='',
                        elem_id='background')
                    background_image = gr.File(
                        label='or a matting background image',
                        file_count='single', type='filepath',
                        elem_id='background_image')
                    run = gr.Button('Run', variant='primary', elem_id='run')
            status = gr.Markdown('', elem_id='status')
            overlays = gr.Image(label='Results (each with its key)',
                                type='numpy', interactive=False,
                                elem_id='overlays')
            files = gr.File(label='Downloads', file_count='multiple',
                            interactive=False, elem_id='downloads')

            def on_run(upload, webcam, tasks, *rest):
                choices = dict(zip(DEMO_TASKS, rest[:len(DEMO_TASKS)]))
                style, formats, mask, background, background_image = \
                    rest[len(DEMO_TASKS):]
                return self.run(upload, webcam, tasks, choices, style,
                                formats, mask, background, background_image)

            run.click(on_run,
                      inputs=[upload, webcam, tasks, *models, style, formats,
                              mask, background, background_image],
                      outputs=[overlays, files, status])
        return app


def build_demo(checkpoints: Sequence[str] = (),
               device: Optional[str] = None,
               out_root: Optional[str] = None,
               max_side: int = 1280,
               configs: Optional[Dict[str, str]] = None):
    """The gradio app over the checkpoints found in ``checkpoints`` (files
    or folders), with ``configs`` per task (see :class:`WebDemo`); every
    task also offers the tiny random-weight model."""
    return WebDemo(find_checkpoints(checkpoints), device, out_root,
                   max_side, configs).build()
