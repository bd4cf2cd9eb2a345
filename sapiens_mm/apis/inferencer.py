"""One inferencer for every Sapiens task: pose, body parts, depth, normals.

:class:`SapiensInferencer` follows the conventions of mmengine's
``BaseInferencer`` and of ``MMPoseInferencer`` / ``MMSegInferencer``: build
it once from models, call it on inputs, get one result dict per image or
video frame, optionally written to ``out_dir``. It runs any combination of
the four tasks on the same inputs, decoding each image once.

Example:
    >>> from sapiens_mm.apis import SapiensInferencer
    >>> inferencer = SapiensInferencer(models=[
    ...     'sapiens_0.3b_goliath_best_goliath_AP_573.pth',
    ...     'sapiens_0.3b_goliath_best_goliath_mIoU_7673_epoch_194.pth'])
    >>> results = inferencer('photo.jpg', out_dir='outputs')
    >>> results[0]['predictions']['pose']['keypoints'].shape
    (1, 308, 2)
"""
import contextlib
import copy
import json
import os
import os.path as osp
import queue
import re
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import (
    Dict,
    Iterable,
    Iterator,
    List,
    Literal,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

import cv2
import numpy as np
import torch
from mmengine.config import Config
from mmengine.dataset import Compose, pseudo_collate
from mmengine.logging import print_log
from mmengine.registry import DefaultScope
from tqdm import tqdm

from sapiens_mm.checkpoint import (
    get_state_dict,
    load_checkpoint,
    load_file,
    load_state_dict,
)
from sapiens_mm.deploy.runtime import is_exported_model

from .model_zoo import SapiensModelInfo, parse_checkpoint_name, recognize_state_dict
from .person_detector import PersonDetector, build_person_detector, select_person_boxes
from .visualization import (
    colorize_depth,
    colorize_normal,
    draw_pose,
    draw_seg,
    skeleton_name,
    vocab_for_num_classes,
)

__all__ = ['SapiensInferencer', 'TASKS', 'task_of_config']

Task = Literal['pose', 'seg', 'depth', 'normal']
#: Tasks in the order they run (segmentation first: it masks depth/normals).
TASKS: Tuple[str, ...] = ('seg', 'depth', 'normal', 'pose')
_SCOPES = dict(pose='mmpose', seg='mmseg', depth='mmseg', normal='mmseg')
_DTYPES = {
    'fp32': torch.float32, 'float32': torch.float32,
    'bf16': torch.bfloat16, 'bfloat16': torch.bfloat16,
    'fp16': torch.float16, 'float16': torch.float16,
}
IMAGE_EXTENSIONS = ('.jpg', '.jpeg', '.png', '.bmp', '.tif', '.tiff', '.webp')
VIDEO_EXTENSIONS = ('.mp4', '.avi', '.mov', '.mkv', '.webm', '.m4v', '.mpg',
                    '.mpeg', '.wmv')
_WEBCAM = re.compile(r'^(webcam(:(?P<a>\d+))?|(?P<b>\d+))$')

InputType = Union[str, Path, np.ndarray, int]
InputsType = Union[InputType, Sequence[InputType]]
ModelSpec = Union[str, Path, Config, dict, tuple]


def task_of_config(cfg: Config) -> str:
    """The task of a model config: ``TopdownPoseEstimator`` is pose,
    ``EncoderDecoder`` is seg, ``SapiensDenseEstimator`` is its ``task``.

    Raises:
        ValueError: Another model type.
    """
    model_type = str(cfg.model.get('type', '')).split('.')[-1]
    if model_type == 'TopdownPoseEstimator':
        return 'pose'
    if model_type == 'EncoderDecoder':
        return 'seg'
    if model_type == 'SapiensDenseEstimator':
        return cfg.model.get('task', 'depth')
    raise ValueError(
        f'Config model type {model_type!r} is not a Sapiens task model; '
        'expected TopdownPoseEstimator (pose), EncoderDecoder (seg) or '
        'SapiensDenseEstimator (depth / normal).')


# --------------------------------------------------------------- models
class _TaskModel:
    """One task's model, its test pipeline and its batched prediction."""

    def __init__(self, task: str, cfg: Config, checkpoint: Optional[str],
                 state_dict: Optional[dict], device: torch.device,
                 dtype: torch.dtype,
                 info: Optional[SapiensModelInfo]) -> None:
        self.task, self.cfg, self.checkpoint = task, cfg, checkpoint
        self.device, self.dtype, self.info = device, dtype, info
        scope = _SCOPES[task]
        with DefaultScope.overwrite_default_scope(scope):
            if task == 'pose':
                from mmpose.registry import MODELS
            else:
                from mmseg.registry import MODELS
            model = MODELS.build(cfg.model)
            self.pipeline = Compose(self._pipeline_cfg(cfg))
        if state_dict is not None:
            load_state_dict(model, state_dict, strict=True, source=checkpoint)
        elif checkpoint is not None:
            load_checkpoint(model, checkpoint, strict=True)
        else:
            print_log(
                f'No checkpoint for the {task} model: it runs with random '
                'weights.', logger='current', level=30)
        self.model = model.to(device).eval()
        self.dataset_meta: dict = {}
        if task == 'pose':
            self.dataset_meta = self._pose_meta(cfg)
            self.model.dataset_meta = self.dataset_meta
            out_layer = model.head.final_layer
        else:
            out_layer = model.decode_head.conv_seg
        if task == 'seg':
            self.vocab = vocab_for_num_classes(model.decode_head.out_channels)
        # Under bf16/fp16 autocast the head output is cast back to float32
        # before decoding (numpy has no bfloat16).
        out_layer.register_forward_hook(lambda m, i, o: o.float())

    def _pipeline_cfg(self, cfg: Config) -> List[dict]:
        steps = copy.deepcopy(cfg.test_dataloader.dataset.pipeline)
        if self.task == 'pose':
            return steps  # mmpose LoadImage reads results['img'] when set
        keep = [
            s for s in steps
            if not str(s['type']).split('.')[-1].startswith('Load') and not
            re.match(r'^Generate\w*Target$', str(s['type']).split('.')[-1])
        ]
        return [dict(type='LoadImageFromNDArray')] + keep

    @staticmethod
    def _pose_meta(cfg: Config) -> dict:
        """Parsed keypoint metainfo of the config's dataset (names, flip
        indices, skeleton, colours). ``mmpose.apis`` is not used: it needs
        ``pkg_resources``, which recent setuptools no longer ship."""
        import mmpose.datasets  # noqa: F401  (registers the datasets)
        from mmpose.datasets.datasets.utils import parse_pose_metainfo
        from mmpose.registry import DATASETS
        for split in ('test_dataloader', 'val_dataloader', 'train_dataloader'):
            dataset = cfg.get(split, {}).get('dataset')
            if not dataset:
                continue
            if 'metainfo' in dataset:
                return parse_pose_metainfo(dict(dataset['metainfo']))
            with DefaultScope.overwrite_default_scope('mmpose'):
                dataset_cls = dataset['type'] if isinstance(
                    dataset['type'], type) else DATASETS.get(dataset['type'])
            if dataset_cls is not None:
                return parse_pose_metainfo(dict(dataset_cls.METAINFO))
        raise ValueError(
            'Cannot read the keypoint metainfo (names, flip pairs, skeleton) '
            'of the pose config: its test_dataloader.dataset needs a '
            'registered mmpose dataset type or a `metainfo` entry.')

    def autocast(self):
        if self.dtype == torch.float32:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.dtype)

    def prepare(self, data_infos: List[dict]) -> List[dict]:
        """Run the test pipeline on ``data_infos`` (thread-safe: the
        inferencer calls it in a worker thread while a model runs)."""
        return [self.pipeline(info) for info in data_infos]

    @torch.no_grad()
    def run(self, packed: List[dict], batch_size: int) -> list:
        """Run the model on pipeline outputs in batches of ``batch_size``."""
        samples = []
        for start in range(0, len(packed), batch_size):
            with self.autocast():
                samples.extend(
                    self.model.test_step(
                        pseudo_collate(packed[start:start + batch_size])))
        return samples

    def compile(self) -> None:
        """``torch.compile`` the backbone in place (the first forward pass
        at each new input shape compiles it)."""
        self.model.backbone.compile()


_DONE = object()


def _in_background(items: Iterator, depth: int = 2) -> Iterator:
    """Iterate ``items`` in a worker thread, up to ``depth`` items ahead of
    the consumer. An exception of ``items`` is raised in the consumer;
    closing the returned generator stops the worker."""
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
                close()  # e.g. releases an open video

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


class _ExportedTaskModel(_TaskModel):
    """A task model exported to ONNX / ``.pt2``
    (:mod:`sapiens_mm.deploy`): same pipeline, same post-processing as
    :class:`_TaskModel`, the network run by onnxruntime / ``torch.export``.
    """

    def __init__(self, task: str, cfg: Config, checkpoint: str,
                 state_dict: Optional[dict], device: torch.device,
                 dtype: torch.dtype,
                 info: Optional[SapiensModelInfo]) -> None:
        from sapiens_mm.deploy import ExportedModel
        if dtype != torch.float32:
            raise ValueError(
                f'{checkpoint} is an exported float32 model: run it with '
                'dtype="fp32".')
        self.task, self.cfg, self.checkpoint = task, cfg, checkpoint
        self.device, self.dtype, self.info = device, dtype, info
        self.model = ExportedModel(checkpoint, str(device))
        meta = self.model.meta
        with DefaultScope.overwrite_default_scope(_SCOPES[task]):
            self.pipeline = Compose(self._pipeline_cfg(cfg))
        self.dataset_meta = {}
        h, w = self.model.input_size
        if task == 'pose':
            from mmpose.registry import KEYPOINT_CODECS
            self.dataset_meta = self._pose_meta(cfg)
            with DefaultScope.overwrite_default_scope('mmpose'):
                self.codec = KEYPOINT_CODECS.build(cfg.model.head.decoder)
            size = [s.input_size for s in self.pipeline.transforms
                    if type(s).__name__ == 'TopdownAffine']
            size = tuple(size[0]) if size else None
        else:
            size = [s.scale for s in self.pipeline.transforms
                    if type(s).__name__ == 'Resize' and not s.keep_ratio]
            size = tuple(size[0]) if size else None
        if size != (w, h):
            raise ValueError(
                f'{checkpoint} takes {h}x{w} (H x W) inputs but the config\'s '
                f'test pipeline makes {size} (W, H); use the config stored '
                'in the exported file (do not pass one) or export at the '
                'pipeline\'s size.')
        if task == 'seg':
            self.vocab = vocab_for_num_classes(int(meta['num_classes']))

    @staticmethod
    def resolve(checkpoint: str, config, task_hint: Optional[str]) -> tuple:
        """-> (task, cfg, checkpoint, None, None) of an exported file; the
        config defaults to the one stored in it."""
        from sapiens_mm.deploy import config_from_data, read_metadata
        meta = read_metadata(checkpoint)
        if config is None:
            # data only: a stored config is never executed
            cfg = config_from_data(meta.get('config'), checkpoint)
        else:
            cfg = config if isinstance(config, Config) else Config.fromfile(
                str(config))
        task = task_of_config(cfg)
        if task != meta['task']:
            raise ValueError(f'{checkpoint} is a {meta["task"]} model but '
                             f'its config is a {task} config.')
        if task_hint is not None and task != task_hint:
            raise ValueError(f'The model given for {task_hint!r} is a {task} '
                             f'model ({checkpoint}).')
        return task, cfg, checkpoint, None, None

    def run(self, packed: List[dict], batch_size: int) -> list:
        """Run the exported network and the eager post-processing on
        pipeline outputs in batches (the pipeline runs in ``prepare``, in the
        inferencer's worker thread, as for eager models)."""
        from sapiens_mm.deploy import postprocess_dense, postprocess_pose
        samples = []
        for start in range(0, len(packed), batch_size):
            chunk_packed = packed[start:start + batch_size]
            images = np.stack([p['inputs'].numpy()
                               for p in chunk_packed]).astype(np.float32)
            chunk = [p['data_samples'] for p in chunk_packed]
            out = self.model(images)
            if self.task == 'pose':
                samples.extend(
                    postprocess_pose(
                        out, chunk, self.codec,
                        self.cfg.model.get('test_cfg', {}).get(
                            'output_keypoint_indices')))
            else:
                samples.extend(
                    postprocess_dense(
                        self.task, out, self.model.input_size, chunk,
                        bool(self.model.meta.get('resize_align_corners'))))
        return samples


# --------------------------------------------------------------- inputs
@dataclass
class _Source:
    kind: str  # 'image' | 'array' | 'video' | 'webcam'
    name: str
    index: int  # position in the user's inputs (for per-input boxes)
    path: Optional[str] = None
    array: Optional[np.ndarray] = None
    cam: Optional[int] = None
    fps: float = 30.0


@dataclass
class _Frame:
    source: _Source
    image: np.ndarray
    frame_index: Optional[int] = None


def _read_image(path: str) -> Optional[np.ndarray]:
    """BGR uint8 image, or None when the file is not a readable image."""
    try:
        buf = np.fromfile(path, np.uint8)
        if buf.size == 0:
            return None
        return cv2.imdecode(buf, cv2.IMREAD_COLOR)
    except (OSError, cv2.error):
        return None


def _check_array(arr: np.ndarray, index: int) -> np.ndarray:
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


def _write_npy(path: str, arr: np.ndarray) -> None:
    os.makedirs(osp.dirname(path), exist_ok=True)
    np.save(path, arr)


def _write_png(path: str, img: np.ndarray) -> None:
    os.makedirs(osp.dirname(path), exist_ok=True)
    ok, buf = cv2.imencode('.png', img)
    if not ok:
        raise RuntimeError(f'Could not encode {path} as PNG.')
    buf.tofile(path)


# ----------------------------------------------------------- inferencer
class SapiensInferencer:
    """Sapiens inference on images, folders, videos and webcams.

    Args:
        models: The models to run. Either a mapping ``{task: spec}`` with
            task ``'pose'``, ``'seg'``, ``'depth'`` or ``'normal'``, or a
            list of specs (or one spec) whose task is recognised. A spec is
            an official Sapiens checkpoint file alone (task and size from its
            name or, failing that, its weights; the shipped config is used),
            a config file (``.py``, random weights), a
            ``dict(config=..., checkpoint=...)`` or a ``(config,
            checkpoint)`` pair. The checkpoint may be a model exported by
            :func:`sapiens_mm.deploy.export_model` (``.onnx``, run with
            onnxruntime, or ``.pt2``): its task and config are read from the
            file, it runs in fp32 with the same pre- and post-processing.
        tasks: Tasks to run, a subset of the models' tasks. Defaults to all
            of them. A task without a model is an error.
        device: ``'cpu'``, ``'cuda'`` or ``'cuda:N'``. Defaults to CUDA when
            available.
        batch_size: Images (dense tasks) or person crops (pose) per forward
            pass. Defaults to 1. Results do not depend on it.
        dtype: ``'fp32'``, ``'bf16'`` or ``'fp16'`` (autocast; fp16 is for
            GPUs). Defaults to ``'fp32'``.
        compile: ``torch.compile`` each model's backbone (the first batch at
            each input size pays for the compilation; needs a C++ compiler
            on CPU). Outputs match eager within float rounding (see
            ``tests/test_fast_inference.py``). Defaults to False.
        detector: Person detector of the pose task when no mmdet config is
            given: ``'hog'`` (OpenCV HOG pedestrian detector, the default),
            ``'haar'`` (OpenCV full-body cascade), ``'none'`` or a
            :class:`~sapiens_mm.apis.person_detector.PersonDetector`.
        det_config: mmdet detector config (takes priority over
            ``detector``), e.g. the official RTMDet-m person detector.
        det_checkpoint: Its checkpoint.
        det_cat_id: Person class index of the mmdet detector. Defaults to 0.
        bbox_thr: Minimum detector score of a person box. Defaults to 0.3.
        nms_thr: IoU threshold of the box NMS. Defaults to 0.3.
        kpt_thr: Keypoints below this score are not drawn. Defaults to 0.3.

    Person boxes come from, in order: boxes given to ``__call__``; else the
    detector (score >= ``bbox_thr``, NMS); else the whole image. Keypoints
    are returned in original image pixels.

    Decoding, person detection and pre-processing of the next batch run in
    a worker thread while the models run on the current one, and the
    previous batch's results are written in another (OpenCV and PyTorch
    release the GIL); results are still yielded in input order, each once
    its files are written. With ``show`` everything runs in the calling
    thread (OpenCV windows need it).
    """

    def __init__(self,
                 models: Union[Mapping[str, ModelSpec], Sequence[ModelSpec],
                               ModelSpec],
                 tasks: Optional[Sequence[Task]] = None,
                 device: Optional[str] = None,
                 batch_size: int = 1,
                 dtype: Literal['fp32', 'bf16', 'fp16'] = 'fp32',
                 compile: bool = False,
                 detector: Union[str, PersonDetector, None] = 'hog',
                 det_config: Optional[Union[str, Config]] = None,
                 det_checkpoint: Optional[str] = None,
                 det_cat_id: int = 0,
                 bbox_thr: float = 0.3,
                 nms_thr: float = 0.3,
                 kpt_thr: float = 0.3) -> None:
        if device is None:
            device = 'cuda' if torch.cuda.is_available() else 'cpu'
        self.device = torch.device(device)
        if self.device.type == 'cuda' and not torch.cuda.is_available():
            raise RuntimeError(f'device={device!r} but CUDA is not available;'
                               ' use device="cpu".')
        if dtype not in _DTYPES:
            raise ValueError(f'dtype must be "fp32", "bf16" or "fp16", got '
                             f'{dtype!r}.')
        self.dtype = _DTYPES[dtype]
        if self.dtype == torch.float16 and self.device.type == 'cpu':
            print_log('fp16 on CPU is slow and not more accurate; bf16 is the '
                      'usual reduced precision there.', logger='current',
                      level=30)
        self.batch_size = self._check_batch_size(batch_size)
        self.bbox_thr, self.nms_thr, self.kpt_thr = bbox_thr, nms_thr, kpt_thr

        specs = self._resolve_specs(models, tasks)
        self.task_models: Dict[str, _TaskModel] = {}
        for task in TASKS:
            if task in specs:
                cfg, checkpoint, state_dict, info = specs[task]
                model_cls = (_ExportedTaskModel
                             if is_exported_model(checkpoint) else _TaskModel)
                self.task_models[task] = model_cls(
                    task, cfg, checkpoint, state_dict, self.device,
                    self.dtype, info)
        self.tasks = tuple(t for t in TASKS if t in self.task_models)
        if compile:
            for tm in self.task_models.values():
                tm.compile()
        self.detector = None
        if 'pose' in self.tasks:
            self.detector = build_person_detector(detector, det_config,
                                                  det_checkpoint, device,
                                                  det_cat_id)
        #: (input, reason) of every input skipped by the last call.
        self.skipped: List[Tuple[str, str]] = []

    # ------------------------------------------------------------ set-up
    @staticmethod
    def _check_batch_size(batch_size) -> int:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f'batch_size must be a positive int, got '
                             f'{batch_size!r}.')
        return batch_size

    @property
    def models(self) -> Dict[str, torch.nn.Module]:
        """The loaded models by task (an exported model is a
        :class:`sapiens_mm.deploy.ExportedModel`)."""
        return {t: m.model for t, m in self.task_models.items()}

    @property
    def model_infos(self) -> Dict[str, Optional[SapiensModelInfo]]:
        """Recognised task / size / dataset of each model loaded from an
        official checkpoint alone (None for models given with a config)."""
        return {t: m.info for t, m in self.task_models.items()}

    def _resolve_specs(self, models, tasks) -> Dict[str, tuple]:
        if tasks is not None:
            tasks = (tasks, ) if isinstance(tasks, str) else tuple(tasks)
            bad = [t for t in tasks if t not in _SCOPES]
            if bad:
                raise ValueError(f'Unknown task(s) {bad}; choose from '
                                 "'pose', 'seg', 'depth', 'normal'.")
        if isinstance(models, Mapping) and not (set(models) & {
                'config', 'checkpoint'}):
            items = list(models.items())
        else:
            if isinstance(models, (str, Path, Config, dict)) or (
                    isinstance(models, tuple) and len(models) == 2 and
                (isinstance(models[0], Config)
                 or str(models[0]).endswith('.py'))):
                models = [models]
            items = [(None, spec) for spec in models]
        specs: Dict[str, tuple] = {}
        for task_hint, spec in items:
            if task_hint is not None and task_hint not in _SCOPES:
                raise ValueError(
                    f'Unknown task {task_hint!r} in models; use "pose", '
                    '"seg", "depth" or "normal".')
            resolved = self._resolve_spec(spec, task_hint)
            task = resolved[0]
            if task in specs:
                raise ValueError(f'Two models were given for the {task} task;'
                                 ' keep one.')
            specs[task] = resolved[1:]
        if not specs:
            raise ValueError('No model given: pass e.g. models=['
                             '"sapiens_0.3b_goliath_best_goliath_AP_573.pth"].')
        if tasks is not None:
            missing = [t for t in tasks if t not in specs]
            if missing:
                raise ValueError(
                    f'No model for task(s) {missing}: add them to models, '
                    'e.g. models={"seg": "sapiens_0.3b_goliath_best_goliath_'
                    'mIoU_7673_epoch_194.pth"}.')
            specs = {t: s for t, s in specs.items() if t in tasks}
        return specs

    @staticmethod
    def _resolve_spec(spec: ModelSpec, task_hint: Optional[str]) -> tuple:
        """-> (task, cfg, checkpoint, state_dict, info)."""
        config = checkpoint = None
        if isinstance(spec, dict):
            unknown = set(spec) - {'config', 'checkpoint'}
            if unknown:
                raise ValueError(f'Model spec keys {sorted(unknown)} are not '
                                 'known; use config= and checkpoint=.')
            config, checkpoint = spec.get('config'), spec.get('checkpoint')
        elif isinstance(spec, (tuple, list)) and len(spec) == 2:
            config, checkpoint = spec
        elif isinstance(spec, Config) or str(spec).endswith('.py'):
            config = spec
        elif isinstance(spec, (str, Path)):
            checkpoint = spec
        else:
            raise TypeError(f'Cannot use {spec!r} as a model: give a '
                            'checkpoint path, a config path, dict(config=..., '
                            'checkpoint=...) or (config, checkpoint).')
        if config is None and checkpoint is None:
            raise ValueError('A model spec needs a config or a checkpoint.')
        if checkpoint is not None:
            checkpoint = osp.expanduser(str(checkpoint))
            if not osp.isfile(checkpoint):
                raise FileNotFoundError(f'Checkpoint not found: {checkpoint}')
        state_dict = info = None
        if checkpoint is not None and is_exported_model(checkpoint):
            return _ExportedTaskModel.resolve(checkpoint, config, task_hint)
        if config is None:
            info = parse_checkpoint_name(checkpoint)
            if info is None:
                state_dict = get_state_dict(load_file(checkpoint))
                info = recognize_state_dict(state_dict, source=checkpoint)
            cfg = Config.fromfile(str(info.config))
        else:
            cfg = config if isinstance(config, Config) else Config.fromfile(
                str(config))
        task = task_of_config(cfg)
        if task_hint is not None and task != task_hint:
            raise ValueError(
                f'The model given for {task_hint!r} is a {task} model '
                f'({checkpoint or config}).')
        return task, cfg, checkpoint, state_dict, info

    # ------------------------------------------------------------ inputs
    def _sources(self, inputs: InputsType) -> List[_Source]:
        if isinstance(inputs, (str, Path, np.ndarray, int)):
            inputs = [inputs]
        sources: List[_Source] = []
        for index, item in enumerate(inputs):
            if isinstance(item, np.ndarray):
                sources.append(
                    _Source('array', f'array_{index:04d}', index,
                            array=_check_array(item, index)))
                continue
            if isinstance(item, (int, np.integer)) and not isinstance(
                    item, bool):
                sources.append(
                    _Source('webcam', f'webcam_{int(item)}', index,
                            cam=int(item)))
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
                        _Source('image', rel.replace(os.sep, '/'), index,
                                path=f))
            elif osp.isfile(path):
                stem = osp.splitext(osp.basename(path))[0]
                kind = 'video' if path.lower().endswith(
                    VIDEO_EXTENSIONS) else 'image'
                sources.append(_Source(kind, stem, index, path=path))
            elif _WEBCAM.match(str(item)):
                m = _WEBCAM.match(str(item))
                cam = int(m.group('a') or m.group('b') or 0)
                sources.append(
                    _Source('webcam', f'webcam_{cam}', index, cam=cam))
            else:
                raise FileNotFoundError(
                    f'Input not found: {path}. Give an image, video or '
                    'folder path, a BGR array, or a webcam index (0, '
                    '"webcam", "webcam:1").')
        seen: Dict[str, int] = {}
        for src in sources:  # unique output names
            n = seen.get(src.name, 0)
            seen[src.name] = n + 1
            if n:
                src.name = f'{src.name}_{n}'
        return sources

    @staticmethod
    def _user_boxes(bboxes, num_inputs: int) -> List[Optional[np.ndarray]]:
        if bboxes is None:
            return [None] * num_inputs
        try:
            arr = np.asarray(bboxes, np.float32)
        except ValueError:  # ragged: one entry per input
            arr = None
        if arr is not None and (arr.ndim == 2 or
                                (arr.ndim == 1 and arr.size in (4, 5))):
            return [arr.reshape(-1, arr.shape[-1])] * num_inputs
        if isinstance(bboxes, (list, tuple)) and len(bboxes) == num_inputs:
            return [
                None if b is None else np.asarray(b, np.float32)
                for b in bboxes
            ]
        raise ValueError(
            'bboxes must be one N x 4 (x1, y1, x2, y2) or N x 5 array used '
            f'for every input, or a list of {num_inputs} such arrays (or '
            'None), one per input.')

    def _frames(self, sources: List[_Source], max_frames: Optional[int],
                bar: tqdm) -> Iterator[_Frame]:
        for src in sources:
            if src.kind == 'array':
                yield _Frame(src, src.array)
            elif src.kind == 'image':
                img = _read_image(src.path)
                if img is None:
                    self._skip(src.path, 'not a readable image')
                    bar.update(1)
                    continue
                yield _Frame(src, img)
            else:
                cap = cv2.VideoCapture(src.cam if src.kind == 'webcam' else
                                       src.path)
                if not cap.isOpened():
                    what = (f'webcam {src.cam}' if src.kind == 'webcam' else
                            f'video {src.path}')
                    if src.kind == 'webcam':
                        raise RuntimeError(f'Cannot open {what}: check the '
                                           'camera index and permissions.')
                    self._skip(src.path, 'OpenCV cannot open the video')
                    continue
                fps = cap.get(cv2.CAP_PROP_FPS)
                src.fps = float(fps) if fps and fps > 0 and np.isfinite(
                    fps) else 30.0
                i = 0
                try:
                    while max_frames is None or i < max_frames:
                        ok, frame = cap.read()
                        if not ok:
                            break
                        yield _Frame(src, frame, i)
                        i += 1
                finally:
                    cap.release()
                if i == 0:
                    self._skip(src.path or src.name, 'no frame could be read')

    def _skip(self, name: str, reason: str) -> None:
        self.skipped.append((name, reason))
        print_log(f'Skipped {name}: {reason}.', logger='current', level=30)

    @staticmethod
    def _total(sources: List[_Source],
               max_frames: Optional[int]) -> Optional[int]:
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

    # ------------------------------------------------------------ call
    def __call__(self,
                 inputs: InputsType,
                 out_dir: Optional[str] = None,
                 batch_size: Optional[int] = None,
                 bboxes=None,
                 return_vis: bool = False,
                 return_datasamples: bool = False,
                 no_save_pred: bool = False,
                 no_save_vis: bool = False,
                 show: bool = False,
                 wait_time: int = 1,
                 draw_bbox: bool = True,
                 max_frames: Optional[int] = None,
                 show_progress: bool = True) -> List[dict]:
        """Run the tasks on ``inputs`` and return one result per image or
        video frame. See :meth:`stream` for the arguments and results; this
        collects them in a list (use :meth:`stream` for webcams and long
        videos)."""
        return list(
            self.stream(inputs, out_dir, batch_size, bboxes, return_vis,
                        return_datasamples, no_save_pred, no_save_vis, show,
                        wait_time, draw_bbox, max_frames, show_progress))

    def stream(self,
               inputs: InputsType,
               out_dir: Optional[str] = None,
               batch_size: Optional[int] = None,
               bboxes=None,
               return_vis: bool = False,
               return_datasamples: bool = False,
               no_save_pred: bool = False,
               no_save_vis: bool = False,
               show: bool = False,
               wait_time: int = 1,
               draw_bbox: bool = True,
               max_frames: Optional[int] = None,
               show_progress: bool = True) -> Iterator[dict]:
        """Run the tasks on ``inputs``, yielding one result per image or
        video frame as soon as it is ready.

        Args:
            inputs: An image / video / folder path, a BGR uint8 array
                (as from ``cv2.imread``), a webcam index (``0``, ``'0'``,
                ``'webcam'``, ``'webcam:1'``) or a list of these. Folders are
                searched recursively for images; unreadable files are
                reported (see :attr:`skipped`) and skipped.
            out_dir: Where to write predictions and visualisations (nothing
                is written when None). Layout: ``<out_dir>/<task>/<name>``
                ``.json`` (pose, COCO-style), ``.npy`` (seg labels uint8,
                depth float32 HxW, normals float32 HxWx3; at the original
                resolution) and ``.png`` (visualisation); for a video,
                per-frame files in ``<task>/<name>/<frame:06d>.*`` and the
                visualisation ``<task>/<name>.mp4`` (same frame count and
                rate). ``<name>`` is the file stem (relative path inside a
                folder input).
            batch_size: Overrides the inferencer's batch size.
            bboxes: Person boxes for pose, in image pixels: one N x 4
                (x1, y1, x2, y2) or N x 5 (+ score) array for every input, or
                a list with one such array (or None) per input.
            return_vis: Add the visualisations (BGR arrays) to the results.
            return_datasamples: Add the raw data samples of each task.
            no_save_pred: Do not write predictions to ``out_dir``.
            no_save_vis: Do not write visualisations to ``out_dir``.
            show: Show the visualisations in windows (``q`` / Esc stops).
            wait_time: ``cv2.waitKey`` time when showing, in ms.
            draw_bbox: Draw person boxes on the pose visualisation.
            max_frames: Read at most this many frames of each video /
                webcam (None: all; a webcam runs until stopped).
            show_progress: Show a progress bar.

        Yields:
            dict: ``input`` (path or name), ``name``, ``frame_index`` (None
            for images), ``img_shape`` (H, W) and ``predictions`` with, per
            task: ``pose``: dict(``skeleton``, ``bboxes`` (N, 4) xyxy,
            ``bbox_scores`` (N,), ``bbox_source`` ('user' / 'detector' /
            'whole_image'), ``keypoints`` (N, K, 2), ``keypoint_scores``
            (N, K)); ``seg``: (H, W) uint8 labels; ``depth``: (H, W)
            float32 relative depth (larger = farther); ``normal``: (H, W, 3)
            float32 unit normals. When seg ran, depth and normals are NaN
            outside the person foreground (label > 0). Also ``pred_files``
            and ``vis_files`` ({task: path} of what was written), plus
            ``visualization`` / ``datasamples`` when asked.
        """
        batch_size = self._check_batch_size(batch_size or self.batch_size)
        self.skipped = []
        sources = self._sources(inputs)
        if not sources:
            raise ValueError('No input given.')
        user_boxes = self._user_boxes(bboxes, max(s.index
                                                  for s in sources) + 1)
        total = self._total(sources, max_frames)
        opts = dict(out_dir=out_dir, return_vis=return_vis,
                    return_datasamples=return_datasamples,
                    save_pred=out_dir is not None and not no_save_pred,
                    save_vis=out_dir is not None and not no_save_vis,
                    show=show, wait_time=wait_time, draw_bbox=draw_bbox)
        writers: Dict[Tuple[int, str], tuple] = {}
        bar = tqdm(total=total, desc='Sapiens inference', unit='img',
                   disable=not show_progress or total == 1)
        overlap = not show
        batches = self._prepared_batches(sources, max_frames, bar,
                                         batch_size, user_boxes)
        if overlap:
            batches = _in_background(batches)
        writer_pool = ThreadPoolExecutor(
            1, thread_name_prefix='sapiens-write') if overlap else None
        pending: Optional[Future] = None
        try:
            for prepared in batches:
                batch = prepared['batch']
                preds = self.run_prepared(prepared, batch_size)
                if writer_pool is None:
                    for frame, pred in zip(batch, preds):
                        result = self.postprocess(frame, pred, writers, opts)
                        bar.update(1)
                        yield result
                    continue
                # Write this batch while the next one runs; hand out the
                # previous batch's results (their files are written).
                future = writer_pool.submit(self._postprocess_batch, batch,
                                            preds, writers, opts)
                if pending is not None:
                    yield from self._finished(pending, bar)
                pending = future
            if pending is not None:
                done, pending = pending, None
                yield from self._finished(done, bar)
        except _StopRequested:
            return
        finally:
            batches.close()
            if writer_pool is not None:
                writer_pool.shutdown(wait=True)
            bar.close()
            for writer, _ in writers.values():
                writer.release()
            if show:
                cv2.destroyAllWindows()

    # ------------------------------------------------------------ steps
    def _prepared_batches(self, sources: List[_Source],
                          max_frames: Optional[int], bar: tqdm,
                          batch_size: int, user_boxes) -> Iterator[dict]:
        batch: List[_Frame] = []
        for frame in self._frames(sources, max_frames, bar):
            batch.append(frame)
            if len(batch) == batch_size:
                yield self.prepare(batch, user_boxes)
                batch = []
        if batch:
            yield self.prepare(batch, user_boxes)

    def _postprocess_batch(self, batch: List[_Frame], preds: List[dict],
                           writers: dict, opts: dict) -> List[dict]:
        return [
            self.postprocess(frame, pred, writers, opts)
            for frame, pred in zip(batch, preds)
        ]

    @staticmethod
    def _finished(future: Future, bar: tqdm) -> Iterable[dict]:
        for result in future.result():
            bar.update(1)
            yield result

    def forward(self, batch: List[_Frame], user_boxes,
                batch_size: int) -> List[dict]:
        """Predictions of every task for a batch of frames (raw data
        samples under ``'_samples'``)."""
        return self.run_prepared(self.prepare(batch, user_boxes), batch_size)

    def prepare(self, batch: List[_Frame], user_boxes) -> dict:
        """Pre-processing of a batch of frames, model-free (the stream runs
        it in a worker thread): each dense task's test pipeline, and for
        pose the person boxes (detector) and crops."""
        images = [f.image for f in batch]
        prepared = dict(batch=batch, dense={}, pose=None)
        for task in ('seg', 'depth', 'normal'):
            if task in self.task_models:
                prepared['dense'][task] = self.task_models[task].prepare(
                    [dict(img=img) for img in images])
        if 'pose' in self.task_models:
            prepared['pose'] = self._prepare_pose(batch, user_boxes)
        return prepared

    def run_prepared(self, prepared: dict, batch_size: int) -> List[dict]:
        """Run the models on a :meth:`prepare` output: the predictions of
        every task per frame (raw data samples under ``'_samples'``)."""
        batch = prepared['batch']
        preds: List[dict] = [dict(_samples={}) for _ in batch]
        for task in ('seg', 'depth', 'normal'):
            if task not in self.task_models:
                continue
            samples = self.task_models[task].run(prepared['dense'][task],
                                                 batch_size)
            for pred, sample in zip(preds, samples):
                pred['_samples'][task] = sample
                if task == 'seg':
                    pred['seg'] = sample.pred_sem_seg.data[0].cpu().numpy(
                    ).astype(np.uint8)
                elif task == 'depth':
                    pred['depth'] = sample.pred_depth_map.data[0].float().cpu(
                    ).numpy().astype(np.float32)
                else:
                    pred['normal'] = sample.pred_normal_map.data.float().cpu(
                    ).numpy().transpose(1, 2, 0).astype(np.float32)
        for pred in preds:  # person foreground masks the dense outputs
            if 'seg' in pred:
                background = pred['seg'] == 0
                for task in ('depth', 'normal'):
                    if task in pred:
                        pred[task][background] = np.nan
        if 'pose' in self.task_models:
            self._forward_pose(prepared['pose'], preds, batch_size)
        return preds

    def _prepare_pose(self, batch: List[_Frame], user_boxes) -> tuple:
        tm = self.task_models['pose']
        infos, owners, poses = [], [], []
        for i, frame in enumerate(batch):
            boxes, scores, source = select_person_boxes(
                frame.image, self.detector, user_boxes[frame.source.index],
                self.bbox_thr, self.nms_thr)
            poses.append(dict(
                skeleton=skeleton_name(tm.dataset_meta), bboxes=boxes,
                bbox_scores=scores, bbox_source=source))
            for box, score in zip(boxes, scores):
                info = dict(img=frame.image, img_path=frame.source.name,
                            bbox=box[None].astype(np.float32),
                            bbox_score=np.array([score], np.float32))
                info.update(tm.dataset_meta)
                infos.append(info)
                owners.append(i)
        return poses, tm.prepare(infos), owners

    def _forward_pose(self, prepared_pose: tuple, preds: List[dict],
                      batch_size: int) -> None:
        tm = self.task_models['pose']
        poses, packed, owners = prepared_pose
        for pred, pose in zip(preds, poses):
            pred['pose'] = pose
        samples = tm.run(packed, batch_size)
        k = int(tm.dataset_meta['num_keypoints'])
        for i, pred in enumerate(preds):
            mine = [s for s, o in zip(samples, owners) if o == i]
            pose = pred['pose']
            pose['keypoints'] = np.stack([
                np.asarray(s.pred_instances.keypoints[0], np.float32)
                for s in mine
            ]) if mine else np.zeros((0, k, 2), np.float32)
            pose['keypoint_scores'] = np.stack([
                np.asarray(s.pred_instances.keypoint_scores[0], np.float32)
                for s in mine
            ]) if mine else np.zeros((0, k), np.float32)
            pred['_samples']['pose'] = mine

    def visualize(self, frame: _Frame, pred: dict,
                  draw_bbox: bool = True) -> Dict[str, np.ndarray]:
        """BGR visualisation of each task's prediction for one frame."""
        vis = {}
        img = frame.image
        fg = pred['seg'] > 0 if 'seg' in pred else None
        if 'seg' in pred:
            vis['seg'] = draw_seg(img, pred['seg'],
                                  self.task_models['seg'].vocab)
        if 'depth' in pred:
            vis['depth'] = colorize_depth(pred['depth'], fg)
        if 'normal' in pred:
            vis['normal'] = colorize_normal(pred['normal'], fg)
        if 'pose' in pred:
            pose = pred['pose']
            vis['pose'] = draw_pose(
                img, pose['keypoints'], pose['keypoint_scores'],
                self.task_models['pose'].dataset_meta,
                bboxes=pose['bboxes'] if draw_bbox else None,
                kpt_thr=self.kpt_thr)
        return vis

    def pose_to_json(self, frame_name: str, frame_index: Optional[int],
                     img_shape: Tuple[int, int], pose: dict) -> dict:
        """COCO-style JSON record of one frame's people."""
        meta = self.task_models['pose'].dataset_meta
        names = [
            meta['keypoint_id2name'][i] for i in range(meta['num_keypoints'])
        ] if 'keypoint_id2name' in meta else None
        instances = []
        for box, bscore, kpts, kscores in zip(pose['bboxes'],
                                              pose['bbox_scores'],
                                              pose['keypoints'],
                                              pose['keypoint_scores']):
            x1, y1, x2, y2 = [float(v) for v in box]
            instances.append(
                dict(
                    bbox=[x1, y1, x2 - x1, y2 - y1],
                    bbox_score=float(bscore),
                    bbox_source=pose['bbox_source'],
                    skeleton=pose['skeleton'],
                    score=float(np.mean(kscores)) if len(kscores) else 0.0,
                    keypoints=np.concatenate(
                        [kpts, kscores[:, None]], axis=1).reshape(-1).tolist(),
                    keypoint_scores=kscores.tolist()))
        return dict(
            input=frame_name,
            frame_index=frame_index,
            height=int(img_shape[0]),
            width=int(img_shape[1]),
            skeleton=pose['skeleton'],
            num_keypoints=int(meta['num_keypoints']),
            keypoint_names=names,
            skeleton_links=[list(map(int, link))
                            for link in meta.get('skeleton_links', [])],
            instances=instances)

    def postprocess(self, frame: _Frame, pred: dict, writers: dict,
                    opts: dict) -> dict:
        """Write files, show and assemble the result dict of one frame."""
        src = frame.source
        video = src.kind in ('video', 'webcam')
        stem = (f'{src.name}/{frame.frame_index:06d}' if video else src.name)
        result = dict(
            input=src.path if src.path is not None else src.name,
            name=src.name,
            frame_index=frame.frame_index,
            img_shape=tuple(frame.image.shape[:2]),
            predictions={t: pred[t]
                         for t in self.tasks},
            pred_files={},
            vis_files={})
        out_dir = opts['out_dir']
        if opts['save_pred']:
            for task in self.tasks:
                if task == 'pose':
                    path = osp.join(out_dir, 'pose', stem + '.json')
                    os.makedirs(osp.dirname(path), exist_ok=True)
                    with open(path, 'w') as f:
                        json.dump(
                            self.pose_to_json(result['input'],
                                              frame.frame_index,
                                              result['img_shape'],
                                              pred['pose']), f)
                else:
                    path = osp.join(out_dir, task, stem + '.npy')
                    _write_npy(path, pred[task])
                result['pred_files'][task] = path
        need_vis = opts['save_vis'] or opts['return_vis'] or opts['show']
        if need_vis:
            vis = self.visualize(frame, pred, opts['draw_bbox'])
            if opts['save_vis']:
                for task, img in vis.items():
                    if video:
                        path = osp.join(out_dir, task, src.name + '.mp4')
                        self._write_video_frame(writers, id(src), task, path,
                                                img, src.fps)
                    else:
                        path = osp.join(out_dir, task, stem + '.png')
                        _write_png(path, img)
                    result['vis_files'][task] = path
            if opts['return_vis']:
                result['visualization'] = vis
            if opts['show']:
                self._show(vis, opts['wait_time'])
        if opts['return_datasamples']:
            result['datasamples'] = pred['_samples']
        return result

    @staticmethod
    def _write_video_frame(writers: dict, src_id: int, task: str, path: str,
                           img: np.ndarray, fps: float) -> None:
        key = (src_id, task)
        if key not in writers:
            for old in [k for k in writers if k[0] != src_id]:
                writers.pop(old)[0].release()  # previous video finished
            os.makedirs(osp.dirname(path), exist_ok=True)
            size = (img.shape[1], img.shape[0])
            writer = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*'mp4v'),
                                     fps, size)
            if not writer.isOpened():
                raise RuntimeError(f'OpenCV cannot write the video {path} '
                                   '(mp4v codec).')
            writers[key] = (writer, size)
        writer, size = writers[key]
        if (img.shape[1], img.shape[0]) != size:
            img = cv2.resize(img, size)
        writer.write(img)

    @staticmethod
    def _show(vis: Dict[str, np.ndarray], wait_time: int) -> None:
        try:
            for task, img in vis.items():
                cv2.imshow(f'Sapiens {task}', img)
            key = cv2.waitKey(max(1, int(wait_time))) & 0xFF
        except cv2.error as e:
            raise RuntimeError(
                f'Cannot open a window to show results ({e}); run without '
                'show / --show and use out_dir instead.') from None
        if key in (ord('q'), 27):
            raise _StopRequested


class _StopRequested(Exception):
    """The user closed the live view."""
