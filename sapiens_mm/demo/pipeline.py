"""The project's main job: synthetic people -> train -> evaluate -> infer.

:func:`run_demo` (``make demo`` / ``demo/main_job.py``) shows the whole
project working on a machine with no downloads and no GPU:

1. render a small synthetic dataset (:mod:`sapiens_mm.datasets.synthetic`)
   with exact labels for the five tasks (soft-edged people with alpha,
   foreground and background for matting);
2. for pose, body-part segmentation, depth, normals and Sapiens2 human
   matting: build the shipped
   tiny-arch config, point it at the data (:func:`adapt_config`), evaluate
   the untrained model on the held-out split with the task's real metric,
   train it with mmengine's ``Runner`` and evaluate again;
3. print one table of each metric before and after training;
4. run :class:`~sapiens_mm.apis.SapiensInferencer` with the five trained
   models on held-out images and on a real photograph (scikit-image's
   astronaut) and write the visualisations.

The configs are the project's real ones; the demo only changes what a short
CPU run needs: data root, input size, number of iterations, learning rate
(the configs' rates are for fine-tuning a pretrained backbone; these models
start from random weights), schedule, batch size and worker count, head
width, milder augmentation, and the depth loss (see :class:`DemoSettings`).
"""
import contextlib
import io
import json
import logging
import os.path as osp
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
from mmengine.config import Config
from mmengine.logging import MMLogger
from mmengine.runner import Runner

from sapiens_mm.apis.inference import set_input_size
from sapiens_mm.engine.fileio import ATOMIC_BACKEND

__all__ = [
    'DEMO_TASKS', 'DEMO_CONFIG_NAME', 'DemoMetric', 'DemoSettings',
    'TaskSpec', 'adapt_config', 'format_table', 'run_commands', 'run_demo'
]


@dataclass(frozen=True)
class DemoMetric:
    """One metric of the before/after table.

    Attributes:
        key: Key in the evaluation results.
        name: Human-readable name.
        higher_is_better: Direction of the metric.
        unit: Printed after the value.
    """
    key: str
    name: str
    higher_is_better: bool
    unit: str = ''


@dataclass(frozen=True)
class TaskSpec:
    """One task of the demo.

    Attributes:
        config: Config path, relative to the ``configs`` folder.
        metrics: Metrics reported in the table; the first is the task's
            headline metric.
    """
    config: str
    metrics: Tuple[DemoMetric, ...]


#: The tasks, in the order they train.
DEMO_TASKS: Dict[str, TaskSpec] = {
    # COCO-17 rather than Goliath-308: the same head and codec, but its
    # targets (17 heatmaps instead of 308) are cheap enough to train for a
    # few hundred iterations within the job's time. Besides OKS AP (strict:
    # it needs face points within a pixel or two on these small people) the
    # table shows mmpose's PCK at 0.1 of the box size.
    'pose': TaskSpec('pose/coco/sapiens_tiny-210e_coco-256x192.py', (
        DemoMetric('coco/AP', 'pose AP (COCO-17 OKS)', True),
        DemoMetric('PCK', 'pose PCK@0.1 (box size)', True),
    )),
    'seg': TaskSpec('seg/goliath/sapiens_tiny-200e_goliath-256x192.py', (
        DemoMetric('mIoU', 'seg mIoU (28 parts)', True, ' %'),
        DemoMetric('aAcc', 'seg pixel accuracy', True, ' %'),
    )),
    'depth': TaskSpec('depth/sapiens_tiny-200e_depth_folder-256x192.py', (
        DemoMetric('depth/rmse', 'depth RMSE (scale+shift aligned)', False,
                   ' m'),
        DemoMetric('depth/abs_rel', 'depth AbsRel', False),
    )),
    'normal': TaskSpec('normal/sapiens_tiny-200e_normal_folder-256x192.py', (
        DemoMetric('normal/mean', 'normal mean angle', False, ' deg'),
        DemoMetric('normal/within_30', 'normals within 30 deg', True, ' %'),
    )),
    'matting': TaskSpec(
        'sapiens2/matting/sapiens2_tiny_matting_gss_p3m_metasim-256x192.py', (
            DemoMetric('matting/sad', 'matting SAD (thousands)', False),
            DemoMetric('matting/mse_unknown', 'matting MSE (unknown band)',
                       False),
        )),
}


@dataclass
class DemoSettings:
    """What the demo does; the defaults are the full main job.

    Attributes:
        out_dir: Everything is written below this folder.
        num_train: Synthetic training images.
        num_val: Held-out images.
        image_size: ``(H, W)`` of the rendered synthetic images.
        input_sizes: Model input ``(H, W)`` per task. Pose runs on person
            crops at 192x144 (12x9 patches): at 128x96 a 16 px patch spans
            an eighth of the crop, too coarse for the tiny encoder's 64
            channels to place keypoints at OKS precision (measured: OKS AP
            0.005 at 128x96, 0.025-0.045 at 192x144 after 600 iterations). The
            dense tasks take the whole image at 128x96 and are evaluated at
            the rendered size.
        max_people: People per image, at most. One by default: the
            generator's multi-person scenes (``max_people=3``, with
            occlusion) make the short schedules learn far less (pose OKS AP
            stays near 0, and depth must then order people by distance).
        iters: Training iterations per task.
        batch_sizes: Training batch size per task (person crops for
            pose, images for the dense tasks). Pose takes 2400 steps of 8
            crops: at about the same cost, more and smaller steps learnt
            more (OKS AP 0.057-0.079 against 0.038-0.051 for 1200 x 16 and
            0.025-0.045 for 600 x 32; 3600 x 4 gave 0.062).
        lr: Peak learning rate (AdamW with the configs' layer decay and
            clipping; linear warm-up, then cosine decay).
        seed: Data and training seed.
        tasks: Tasks to train, a subset of :data:`DEMO_TASKS`.
        num_infer: Held-out images to run the inferencer on.
        workers: Worker processes for rendering the data.
        data_workers: Dataloader workers of the training runs.
        threads: Torch threads of the training runs. One thread for the
            model and one data worker use two cores without contention.
        light_augmentation: Milder geometric augmentation than the
            configs' (which are tuned for 200-epoch schedules).
        head_channels: Width of the decode heads' (de)convolutions, instead
            of the tiny configs' 64 (the heads' convolutions at full
            resolution dominate the cost of these small models); ``None``
            keeps the configs' widths.
        depth_loss: Loss type the depth model trains with, replacing the
            config's ``loss_decode``; ``None`` keeps the config's official
            ``DepthSiLogLoss``. Default ``DepthScaleShiftLoss``: on the
            min-max normalised targets SiLog works in log space, where the
            pixels next to the nearest point dominate, and from random
            weights the tiny model stayed near the best constant
            prediction (loss ~1.0 throughout; RMSE -12 % in 300
            iterations); the scale-and-shift-invariant RMSE, what the
            metric measures, learnt body-scale structure.
    """
    out_dir: str = 'work_dirs/demo'
    num_train: int = 400
    num_val: int = 40
    image_size: Tuple[int, int] = (256, 192)
    input_sizes: Dict[str, Tuple[int, int]] = field(default_factory=lambda: dict(
        pose=(192, 144), seg=(128, 96), depth=(128, 96), normal=(128, 96),
        matting=(128, 96)))
    max_people: int = 1
    iters: Dict[str, int] = field(default_factory=lambda: dict(
        pose=2400, seg=300, depth=300, normal=150, matting=150))
    batch_sizes: Dict[str, int] = field(default_factory=lambda: dict(
        pose=8, seg=8, depth=8, normal=8, matting=8))
    lr: float = 2e-3
    seed: int = 0
    tasks: Sequence[str] = tuple(DEMO_TASKS)
    num_infer: int = 4
    workers: int = 2
    data_workers: int = 1
    threads: int = 1
    head_channels: Optional[int] = 32
    light_augmentation: bool = True
    depth_loss: Optional[str] = 'DepthScaleShiftLoss'


def _lighten_augmentation(cfg: Config) -> None:
    """Milder geometric augmentation for a schedule of a few hundred
    iterations: no rotations or half-body crops, scale jitter 0.75-1.5
    (dense) or 0.8-1.2 (pose boxes). Flips and photometric distortion stay."""
    pipeline = [
        t for t in cfg.train_dataloader.dataset.pipeline
        if t.type != 'RandomHalfBody'
    ]
    for t in pipeline:
        if t.type in ('RandomRotate', 'DenseRandomRotate'):
            t.prob = 0.0
        elif t.type == 'RandomResize':
            t.ratio_range = (0.75, 1.5)
        elif t.type == 'RandomBBoxTransform':
            t.update(rotate_prob=0.0, scale_factor=(0.8, 1.2))
    cfg.train_dataloader.dataset.pipeline = pipeline


#: File name of each task's config in its work dir.
DEMO_CONFIG_NAME = 'demo_config.py'


def adapt_config(cfg: Config, task: str, data_root: str, work_dir: str,
                 settings: DemoSettings) -> Config:
    """Point a shipped tiny config at the demo data and make it a short,
    single-process CPU run (see the module docstring for what changes).

    The result is called ``<work_dir>/demo_config.py`` (its ``filename``):
    the Runner writes it there, the one config of the work dir. Its
    checkpoints carry it as data
    (:class:`~sapiens_mm.engine.ConfigDataHook`)."""
    iters = int(settings.iters[task])
    cfg = set_input_size(cfg, settings.input_sizes[task], train=True)
    cfg.work_dir = work_dir
    cfg.launcher = 'none'
    cfg.randomness = dict(seed=settings.seed)
    for key in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        loader = cfg[key]
        loader.update(num_workers=0, persistent_workers=False)
        loader.dataset.data_root = data_root
    # One worker prepares training batches while the model computes.
    cfg.train_dataloader.update(num_workers=settings.data_workers,
                                persistent_workers=settings.data_workers > 0)
    cfg.train_dataloader.batch_size = int(settings.batch_sizes[task])
    cfg.train_dataloader.sampler = dict(type='InfiniteSampler', shuffle=True)
    cfg.val_dataloader.batch_size = 8
    cfg.test_dataloader = cfg.val_dataloader
    if task == 'pose':
        # The generator writes both skeletons: goliath_308.json for
        # GoliathDataset, coco_17.json for the COCO datasets.
        ann = ('coco_17.json' if cfg.train_dataloader.dataset.type in (
            'CocoDataset', 'CheckedCocoDataset') else 'goliath_308.json')
        for split, loader in (('train', cfg.train_dataloader),
                              ('val', cfg.val_dataloader)):
            loader.dataset.ann_file = f'{split}/annotations/{ann}'
            loader.dataset.data_prefix = dict(img=f'{split}/images/')
            loader.dataset.pop('bbox_file', None)  # ground-truth boxes
        cfg.val_evaluator.ann_file = osp.join(data_root, 'val/annotations',
                                              ann)
        cfg.val_evaluator = [
            cfg.val_evaluator,
            dict(type='PCKAccuracy', thr=0.1, norm_item='bbox')
        ]
        cfg.test_evaluator = cfg.val_evaluator
    if task == 'seg':
        # The synthetic images already have varied backgrounds, and there is
        # no background image folder to draw from.
        cfg.train_dataloader.dataset.pipeline = [
            t for t in cfg.train_dataloader.dataset.pipeline
            if t.type != 'RandomBackground'
        ]
    if task == 'matting':
        # the generator's soft-edged people: alpha, foreground, background
        for split, loader in (('train', cfg.train_dataloader),
                              ('val', cfg.val_dataloader)):
            loader.dataset.data_prefix = dict(
                img_path=f'{split}/images', alpha_path=f'{split}/alphas',
                fg_path=f'{split}/fgs', bg_path=f'{split}/bgs')
    if task == 'depth' and settings.depth_loss is not None:
        cfg.model.decode_head.loss_decode = dict(type=settings.depth_loss)
    if settings.head_channels is not None:
        head = cfg.model.get('decode_head', cfg.model.get('head'))
        c = int(settings.head_channels)
        for key in ('channels', 'deconv_out_channels', 'conv_out_channels'):
            if key in head:
                head[key] = c if key == 'channels' else (c, ) * len(head[key])
    if settings.light_augmentation:
        _lighten_augmentation(cfg)
    cfg.optim_wrapper.optimizer.lr = settings.lr
    warmup = max(1, iters // 10)
    cfg.param_scheduler = [
        dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0,
             end=warmup),
        dict(type='CosineAnnealingLR', by_epoch=False, begin=warmup,
             end=iters, T_max=iters - warmup, eta_min=settings.lr * 0.01),
    ]
    # Validation is run by the demo itself, before and after training.
    cfg.train_cfg = dict(type='IterBasedTrainLoop', max_iters=iters,
                         val_begin=iters + 1, val_interval=iters + 1)
    cfg.log_processor = dict(type='LogProcessor', by_epoch=False,
                             window_size=20)
    cfg.default_hooks.logger = dict(type='LoggerHook', interval=50)
    cfg.default_hooks.checkpoint = dict(
        type='CheckpointHook', by_epoch=False, interval=iters,
        max_keep_ckpts=1, save_last=True,
        backend_args=dict(backend=ATOMIC_BACKEND))
    cfg.default_hooks.pop('visualization', None)
    cfg.visualizer.vis_backends = [dict(type='LocalVisBackend')]
    # the checkpoint carries this config as data: it runs from the file alone
    cfg.custom_hooks = list(cfg.get('custom_hooks') or []) + [
        dict(type='ConfigDataHook')]
    # The Runner writes the config into work_dir under the file name of the
    # config: the demo's own name, not the shipped config's it was made from
    return Config(cfg.to_dict(), cfg_text=cfg.pretty_text,
                  filename=osp.join(work_dir, DEMO_CONFIG_NAME))


def _metric(metrics: dict, key: str) -> float:
    if key not in metrics:
        raise KeyError(f'metric {key!r} not in the evaluation results '
                       f'{sorted(metrics)}')
    return float(metrics[key])


def format_table(rows: List[dict]) -> str:
    """The before/after table.

    Args:
        rows: One dict per task and metric with ``task``, ``metric_name``, ``before``,
            ``after``, ``higher_is_better``, ``unit`` and ``train_s``.

    Returns:
        The table as text (markdown-compatible).
    """
    header = ('| task | metric | untrained | trained | better | train time |',
              '|---|---|---|---|---|---|')
    lines = list(header)
    for r in rows:
        better = (r['after'] > r['before'] if r['higher_is_better'] else
                  r['after'] < r['before'])
        arrow = 'higher is better' if r['higher_is_better'] else \
            'lower is better'
        lines.append(
            f"| {r['task']} | {r['metric_name']} ({arrow}) | "
            f"{r['before']:.4g}{r['unit']} | {r['after']:.4g}{r['unit']} | "
            f"{'yes' if better else 'NO'} | {r['train_s']:.0f} s |")
    return '\n'.join(lines)


def run_commands(checkpoints: Dict[str, str], photo: str) -> List[str]:
    """The lines that tell how to run the trained models: the command on
    the demo's photograph (each checkpoint alone: each carries its config),
    the web demo over them, and what to put in the photo's place; paths
    relative to the current folder when inside it, the interpreter as
    :func:`~sapiens_mm.utils.commands.python_command` names it, so that the
    commands run as printed, with the environment activated or not.

    Args:
        checkpoints: ``{task: checkpoint path}``.
        photo: The photograph the inference ran on.
    """
    from sapiens_mm.utils.commands import python_command

    def rel(path: str) -> str:
        path = osp.abspath(path)
        inside = osp.relpath(path)
        return inside if not inside.startswith('..') else path

    python = python_command()
    models = ' '.join(f'--{task} {rel(ckpt)}'
                      for task, ckpt in checkpoints.items())
    work_dir = rel(osp.dirname(osp.dirname(next(iter(checkpoints.values())))))
    return [
        'run the trained models on a photo (results in outputs/<task>/):',
        f'  {python} -m sapiens_mm {rel(photo)} {models} --out-dir outputs',
        '  (your own photo, a folder, a video or a webcam index works in its'
        f' place; {python} -m sapiens_mm --help lists the options)',
        'or in the browser (then open http://127.0.0.1:7860):',
        f'  {python} demo/web_demo.py --checkpoints {work_dir}',
    ]


def _val_boxes(data_root: str, names: List[str]) -> List[np.ndarray]:
    """Ground-truth person boxes (xyxy) of held-out images."""
    ann = json.loads(Path(data_root, 'val/annotations/goliath_308.json')
                     .read_text())
    by_name = {im['file_name']: im['id'] for im in ann['images']}
    boxes = []
    for name in names:
        image_id = by_name[name]
        xywh = np.array([a['bbox'] for a in ann['annotations']
                         if a['image_id'] == image_id], np.float32)
        xywh = xywh.reshape(-1, 4)
        boxes.append(np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]],
                                    axis=1))
    return boxes


class _ProgressOnly(logging.Filter):
    """Console filter: training / validation progress and warnings."""

    def filter(self, record: logging.LogRecord) -> bool:
        return (record.levelno >= logging.ERROR
                or str(record.msg).startswith(('Iter(train)', 'Iter(val)')))


def _quiet_runner(cfg: Config) -> Runner:
    """A Runner whose console shows only progress lines; its log file in
    ``work_dir`` keeps everything (environment, config, hooks)."""
    with contextlib.redirect_stdout(io.StringIO()):
        runner = Runner.from_cfg(cfg)
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter('      %(message)s'))
    handler.addFilter(_ProgressOnly())
    logger = runner.logger
    logger.handlers = [
        h for h in logger.handlers
        if type(h) is not logging.StreamHandler
    ] + [handler]
    return runner


def run_demo(settings: DemoSettings,
             config_dir: str,
             echo: Optional[Callable[[str], None]] = None) -> dict:
    """Run the main job; returns the table rows and output paths.

    Args:
        settings: What to run.
        config_dir: The repository's ``configs`` folder.
        echo: Where the progress lines and the final table go
            (``demo/main_job.py`` passes ``print``). Defaults to the mmengine
            logger.

    Returns:
        ``dict(rows=..., table=..., vis_dirs=..., elapsed_s=...)``.
    """
    from sapiens_mm.apis.inferencers import SapiensInferencer
    from sapiens_mm.datasets.synthetic import write_dataset

    unknown = set(settings.tasks) - set(DEMO_TASKS)
    if unknown or not settings.tasks:
        raise ValueError(f'tasks must be a non-empty subset of '
                         f'{list(DEMO_TASKS)}, got {list(settings.tasks)}')
    if echo is None:
        def echo(text: str) -> None:
            MMLogger.get_current_instance().info(text)
    start = time.perf_counter()
    out = Path(settings.out_dir).resolve()
    data_root = str(out / 'data')
    h, w = settings.image_size
    people = ('one person' if settings.max_people == 1 else
              f'1-{settings.max_people} people')
    # one numbered step each: rendering, each task's training, inference,
    # the results
    steps = 3 + len(settings.tasks)
    echo(f'[1/{steps}] rendering {settings.num_train} + {settings.num_val} '
          f'synthetic images ({people} each) at {h}x{w} into {data_root}')
    write_dataset(data_root, settings.num_train, settings.num_val,
                  seed=settings.seed, size=settings.image_size,
                  max_people=settings.max_people,
                  num_workers=settings.workers, progress=True,
                  matting='matting' in settings.tasks)

    rows, checkpoints = [], {}
    for i, task in enumerate(settings.tasks):
        spec = DEMO_TASKS[task]
        work_dir = str(out / task)
        cfg = adapt_config(Config.fromfile(osp.join(config_dir, spec.config)),
                           task, data_root, work_dir, settings)
        ih, iw = settings.input_sizes[task]
        echo(f'[{i + 2}/{steps}] {task} (input {ih}x{iw}): evaluate, '
             f'train {settings.iters[task]} iterations, evaluate (log: '
             f'{work_dir})')
        # A name of its own per task (mmengine keys its loggers and scopes
        # by experiment name): each task's log goes to its own work_dir.
        cfg.experiment_name = f'demo_{task}_{time.strftime("%Y%m%d_%H%M%S")}'
        runner = _quiet_runner(cfg)
        # pycocotools prints its tables to stdout: keep them in the log only
        with contextlib.redirect_stdout(io.StringIO()):
            before = runner.val()
            t0 = time.perf_counter()
            runner.train()
            train_s = time.perf_counter() - t0
            after = runner.val()
        ckpt = osp.join(work_dir, f'iter_{settings.iters[task]}.pth')
        # the checkpoint alone: it carries its config (as the user runs it)
        checkpoints[task] = ckpt
        for m in spec.metrics:
            row = dict(task=task, metric_name=m.name,
                       before=_metric(before, m.key),
                       after=_metric(after, m.key),
                       higher_is_better=m.higher_is_better, unit=m.unit,
                       train_s=train_s)
            rows.append(row)
            echo(f"      {m.name}: {row['before']:.4g}{m.unit} -> "
                 f"{row['after']:.4g}{m.unit}")
        del runner

    echo(f'[{steps - 1}/{steps}] inference on held-out images and a real '
         'photograph')
    # The inference's warnings (e.g. every keypoint below the drawing
    # threshold) reach the console; its info lines do not.
    MMLogger.get_instance('sapiens_demo_inference', log_level='WARNING')
    with contextlib.redirect_stdout(io.StringIO()):
        # Held-out images get their ground-truth person boxes; the photograph
        # is a portrait, so its person box is the whole image (no detector).
        inferencer = SapiensInferencer(checkpoints, device='cpu', batch_size=4,
                                       detector='none')
    val_dir = Path(data_root, 'val/images')
    names = sorted(p.name for p in val_dir.glob('*.png'))[:settings.num_infer]
    vis_dirs = {}
    held_out = out / 'vis' / 'held_out'
    bboxes = _val_boxes(data_root, names) if 'pose' in checkpoints else None
    inferencer([str(val_dir / n) for n in names], out_dir=str(held_out),
               bboxes=bboxes, show_progress=False)
    vis_dirs['held-out images'] = str(held_out)

    import cv2
    from skimage import data as skdata
    photo_dir = out / 'photo'
    photo_dir.mkdir(parents=True, exist_ok=True)
    photo = str(photo_dir / 'astronaut.png')
    cv2.imwrite(photo, cv2.cvtColor(skdata.astronaut(), cv2.COLOR_RGB2BGR))
    real = out / 'vis' / 'astronaut'
    inferencer(photo, out_dir=str(real), show_progress=False)
    vis_dirs['real photograph (scikit-image astronaut)'] = str(real)

    elapsed = time.perf_counter() - start
    table = format_table(rows)
    echo(f'[{steps}/{steps}] results on the held-out split '
         f'({settings.num_val} images, trained on {settings.num_train})')
    echo(table)
    for what, path in vis_dirs.items():
        echo(f'visualisations of {what}: {path}/<task>/*.png '
             '(skeleton overlay, part colours, depth colour map, normal RGB,'
             ' matting composite; each captioned with its model) next to the '
             'predictions (.json / .npy)')
    echo(f'trained checkpoints (each carries its config), configs '
         f'({DEMO_CONFIG_NAME}) and logs: {out}/<task>/')
    for line in run_commands(checkpoints, photo):
        echo(line)
    echo(f'elapsed: {elapsed:.0f} s ({elapsed / 60:.1f} min)')
    (out / 'results.md').write_text(table + '\n')
    return dict(rows=rows, table=table, vis_dirs=vis_dirs, elapsed_s=elapsed)
