"""Build Sapiens task models: the one builder, task detection and metadata.

:func:`init_model` is the single way sapiens_mm builds a pose, seg, depth or
normal model from a config (and loads its weights): the inferencers, the
exporter (:mod:`sapiens_mm.deploy`) and the benchmark all call it. Like
``mmpose.apis.init_model`` / ``mmseg.apis.init_model`` it returns the model
in eval mode with ``model.cfg`` and ``model.dataset_meta`` set, so stock
OpenMMLab visualisers and inferencers can use it too.

Example:
    >>> from sapiens_mm.apis import init_model
    >>> model = init_model(
    ...     'configs/seg/goliath/sapiens_0.3b-200e_goliath-1024x768.py',
    ...     'sapiens_0.3b_goliath_best_goliath_mIoU_7673_epoch_194.pth')
    >>> model.dataset_meta['classes'][:2]
    ('Background', 'Apparel')
"""
import contextlib
import copy
import logging
import os.path as osp
import re
from pathlib import Path
from typing import List, Mapping, Optional, Tuple, Union

import torch
import torch.nn as nn
from mmengine.config import Config
from mmengine.logging import print_log
from mmengine.registry import DefaultScope

from sapiens_mm.datasets.dataset_meta import (
    dataset_meta_of_config,
    pose_dataset_meta,
    seg_dataset_meta,
    skeleton_name,
)
from sapiens_mm.tasks import (
    DTYPES,
    TASK_SCOPES,
    TASKS,
    Task,
    resolve_dtype,
    task_of_config,
)
from sapiens_mm.utils.cpu_features import (cpu_has_native_bf16,
                                           log_cpu_dtype_advice)
from sapiens_mm.utils.cpu_linear import pack_cpu_linears

__all__ = [
    'TASKS', 'TASK_SCOPES', 'DTYPES', 'Task', 'load_config', 'task_of_config',
    'init_model', 'optimize_for_inference', 'dataset_meta_of_config', 'pose_dataset_meta',
    'seg_dataset_meta', 'skeleton_name', 'inference_pipeline',
    'find_pipeline_step', 'set_input_size', 'autocast', 'check_batch_size',
    'resolve_device_and_dtype', 'auto_dtype'
]

ConfigType = Union[str, Path, Config]


def load_config(config: ConfigType,
                cfg_options: Optional[dict] = None) -> Config:
    """A copy of ``config`` (a file or a :class:`~mmengine.config.Config`)
    with ``cfg_options`` merged in.

    Raises:
        FileNotFoundError: The config file does not exist.
        TypeError: ``config`` is neither a path nor a Config.
    """
    if isinstance(config, Config):
        cfg = copy.deepcopy(config)
    elif isinstance(config, (str, Path)):
        path = osp.expanduser(str(config))
        if not osp.isfile(path):
            raise FileNotFoundError(f'Config not found: {path}')
        cfg = Config.fromfile(path)
    else:
        raise TypeError(f'config must be a file path or a Config, got '
                        f'{type(config).__name__}.')
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    return cfg


# ------------------------------------------------------------------ model
def init_model(config: ConfigType,
               checkpoint: Union[str, Path, Mapping[str, torch.Tensor],
                                 None] = None,
               device: Union[str, torch.device] = 'cpu',
               cfg_options: Optional[dict] = None) -> nn.Module:
    """Build a Sapiens task model from its config and load its weights.

    Args:
        config: Config file or :class:`~mmengine.config.Config` of a pose,
            seg, depth or normal model (not modified).
        checkpoint: Weights: a checkpoint file, read through
            :func:`sapiens_mm.checkpoint.load_checkpoint` (safe unpickling,
            strict keys), or a state dict already read. None keeps the
            config's initialisation (random weights for a backbone with
            ``init_cfg=None``) and logs a warning.
        device: Where the model goes. Defaults to ``'cpu'``.
        cfg_options: Overrides merged into the config first.

    Returns:
        The model in eval mode, with ``model.cfg`` (the config used) and
        ``model.dataset_meta`` (from the checkpoint's ``meta`` when it
        carries one, else from the config; see
        :func:`dataset_meta_of_config`). A plain PyTorch model:
        :func:`optimize_for_inference` gives it the CPU inference form the
        inferencers run (packed linear weights).

    Raises:
        FileNotFoundError: The config or checkpoint does not exist.
        ValueError: The config is not a Sapiens task model.
        RuntimeError: The weights do not fit the model (strict loading).
    """
    import sapiens_mm  # noqa: F401  (registers the modules)
    from sapiens_mm.checkpoint import load_state_dict, read_checkpoint
    cfg = load_config(config, cfg_options)
    task = task_of_config(cfg)
    if isinstance(checkpoint, (str, Path)):
        checkpoint = osp.expanduser(str(checkpoint))
        if not osp.isfile(checkpoint):
            raise FileNotFoundError(f'Checkpoint not found: {checkpoint}')
    if checkpoint is not None:
        # the checkpoint holds the backbone: no pretrained init needed
        cfg.model.backbone.init_cfg = None
    if task == 'matting' and checkpoint is not None:
        # The released matting head's widths are not documented: build the
        # head the weights describe (then they load strictly).
        cfg = _fit_head_widths(cfg, checkpoint)
    meta = state = None
    source = checkpoint if isinstance(checkpoint, str) else 'state dict'
    with DefaultScope.overwrite_default_scope(TASK_SCOPES[task]):
        if task == 'pose':
            from mmpose.registry import MODELS
        else:
            from mmseg.registry import MODELS
        if checkpoint is not None:
            # Keys and shapes are checked on a skeleton without memory
            # first: a file that does not fit (e.g. a small file named like
            # a 2B checkpoint) is refused before the model is allocated.
            with torch.device('meta'):
                skeleton = MODELS.build(cfg.model)
            if isinstance(checkpoint, str):
                loaded, state = read_checkpoint(checkpoint, skeleton)
                meta = loaded.get('meta', {}).get('dataset_meta') if \
                    isinstance(loaded, dict) and isinstance(
                        loaded.get('meta'), dict) else None
            else:
                state = checkpoint
            load_state_dict(skeleton, state, strict=True, source=source)
            del skeleton
        model = MODELS.build(cfg.model)
    if state is not None:
        load_state_dict(model, state, strict=True, source=source)
    else:
        print_log(
            f'No checkpoint for the {task} model: it keeps its initial '
            '(random) weights.',
            logger='current',
            level=30)
    if isinstance(meta, dict) and meta:
        _check_dataset_meta(meta, model, task, source)
    model.cfg = cfg
    model.dataset_meta = dict(meta) if isinstance(
        meta, dict) and meta else dataset_meta_of_config(cfg)
    return model.to(device).eval()


def optimize_for_inference(
        model: nn.Module,
        dtype: Union[None, str, torch.dtype] = None) -> nn.Module:
    """Put ``model`` in eval mode and its CPU linear layers in their
    inference form, in place: the call that gives a model built any way
    (:func:`init_model`, ``MODELS.build`` from a config, mmengine's
    Runner) the speed of the inferencers, which make it themselves.

    Each plain ``nn.Linear`` / mmcv ``Linear`` whose weight is on the CPU
    gets its weight packed once in oneDNN's GEMM layout, in ``dtype``,
    replacing the plain weight (no second copy; see
    :mod:`sapiens_mm.utils.cpu_linear`). The model then runs CPU inference
    only (autograd, ``torch.compile`` and export need the plain model).
    Writing a linear weight directly (``.data``, ``copy_``, an optimiser
    step) raises :class:`~sapiens_mm.utils.cpu_linear.PackedWeightError`;
    ``load_state_dict`` repacks what it is given; ``state_dict()`` gives
    the unpacked weights. ``model.train()``, moving or casting the model,
    or :func:`~sapiens_mm.utils.cpu_linear.unpack_cpu_linears` (which
    keeps eval mode) converts it back. Layers on another device, and
    dtypes oneDNN cannot pack on this CPU (bf16 without AVX-512 or
    AVX-NE-CONVERT), stay plain.

    Example:
        >>> from mmpose.registry import MODELS
        >>> model = MODELS.build(cfg.model)
        >>> model.load_state_dict(state)
        >>> optimize_for_inference(model)  # float32, packed
        >>> with torch.inference_mode():
        ...     out = model(inputs, mode='tensor')

    Args:
        model: The model (any ``nn.Module``).
        dtype: The linear layers' compute dtype: the precision the model
            runs at, e.g. ``'bf16'`` for a float32 model run under
            ``torch.autocast('cpu', torch.bfloat16)`` (its linear weights
            are then held in bf16: half the memory; converting back gives
            the bf16-rounded values). None (default): each weight's own
            dtype (lossless).

    Returns:
        ``model`` (the same object).

    Raises:
        ValueError: An unknown ``dtype`` name.
    """
    if dtype is not None:
        dtype = resolve_dtype(dtype)
    model.eval()
    count = pack_cpu_linears(model, dtype)
    print_log(f'optimize_for_inference: {count} linear layers packed for '
              'CPU inference' + (f' in {str(dtype)[6:]}' if dtype else ''),
              logger='current', level=logging.DEBUG)
    return model


def _fit_head_widths(cfg: Config,
                     checkpoint: Union[str, Mapping[str, torch.Tensor]]
                     ) -> Config:
    """``cfg`` with the decode head's channel plan read from the tensor
    shapes of ``checkpoint`` (a safetensors file: its header only; another
    file is read; a state dict), logged when it differs from the
    config's."""
    from sapiens_mm.checkpoint import get_state_dict, load_file
    from sapiens_mm.checkpoint.safetensors_io import (is_safetensors_file,
                                                      safetensors_shapes)
    from sapiens_mm.models.heads import Sapiens2DenseHead
    source = checkpoint if isinstance(checkpoint, str) else 'state dict'
    if not isinstance(checkpoint, str):
        shapes = {k: tuple(v.shape) for k, v in checkpoint.items()}
    elif is_safetensors_file(checkpoint):
        shapes = safetensors_shapes(checkpoint)
    else:
        shapes = {k: tuple(v.shape) for k, v in get_state_dict(
            load_file(checkpoint)).items()}
    found = Sapiens2DenseHead.channels_of_state_dict(shapes)
    head = cfg.model.decode_head
    if found is None:
        return cfg
    current = dict(
        upsample_channels=tuple(head.get('upsample_channels', ())),
        conv_out_channels=tuple(head.get('conv_out_channels', ())))
    if current != found:
        print_log(
            f'{source}: head widths {found} (from its tensor shapes) differ '
            f'from the config\'s {current}; building the head the weights '
            'describe.', logger='current')
        head.update(found)
    return cfg


def _check_dataset_meta(meta: dict, model: nn.Module, task: str,
                        source: str) -> None:
    """Refuse a checkpoint whose stored ``dataset_meta`` describes another
    number of keypoints / classes than the model outputs (decoding and
    drawing would fail part-way through a run)."""
    if task == 'pose':
        stored = meta.get('num_keypoints')
        outputs = getattr(getattr(model, 'head', None), 'out_channels', None)
        what = 'keypoints'
    elif task == 'seg':
        classes = meta.get('classes')
        stored = len(classes) if isinstance(classes, (list, tuple)) else None
        outputs = getattr(getattr(model, 'decode_head', None), 'num_classes',
                          None)
        what = 'classes'
    else:
        return
    if isinstance(stored, int) and isinstance(outputs, int) and \
            stored != outputs:
        raise ValueError(
            f'{source}: its meta.dataset_meta describes {stored} {what}, but '
            f'the model of the config predicts {outputs}; the checkpoint '
            'belongs to another dataset or config. Use the config it was '
            'trained with.')


# --------------------------------------------------------------- pipeline
def _step_name(step: dict) -> str:
    return str(step['type']).split('.')[-1]


def inference_pipeline(cfg: Config) -> List[dict]:
    """The test pipeline of ``cfg`` for images given as arrays.

    Pose keeps the pipeline (mmpose's ``LoadImage`` reads ``results['img']``
    when set). Dense tasks drop the loading and target steps (they need
    files and annotations) and start with ``LoadImageFromNDArray``.
    """
    steps = copy.deepcopy(cfg.test_dataloader.dataset.pipeline)
    if task_of_config(cfg) == 'pose':
        return steps
    keep = [
        s for s in steps if not _step_name(s).startswith('Load')
        and not re.match(r'^Generate\w*Target$', _step_name(s))
    ]
    return [dict(type='LoadImageFromNDArray')] + keep


def find_pipeline_step(pipeline: List[dict], name: str) -> Optional[dict]:
    """The first step of ``pipeline`` whose type is ``name`` (a scope
    prefix such as ``mmpose.`` is ignored), or None."""
    for step in pipeline:
        if _step_name(step) == name:
            return step
    return None


def set_input_size(cfg: Config,
                   input_size: Tuple[int, int],
                   train: bool = False) -> Config:
    """A copy of ``cfg`` whose model runs at ``input_size`` (H, W).

    Always: pose ``TopdownAffine`` (or ``Sapiens2TopdownAffine``) of the
    test pipeline and the codec (``model.head.decoder``, keeping the heatmap
    stride); dense tasks the test pipeline's ``Resize`` (``AreaCubicResize``,
    or Sapiens2's ``ResizePadImage``) and the data preprocessor's ``size``.
    A Sapiens2 pointmap head runs at its own size only (refused otherwise). The
    backbone keeps its ``img_size`` (and so a checkpoint's position
    embeddings, resized to the new patch grid in the forward pass).

    With ``train``: also the backbone's ``img_size`` and every resize /
    crop / affine / target step of the training and validation pipelines
    (for training at that size).

    Raises:
        ValueError: A side is not a positive multiple of the patch size and
            of the heatmap stride, or the test pipeline has no step that sets
            the size.
    """
    cfg = copy.deepcopy(cfg)
    task = task_of_config(cfg)
    h, w = (int(v) for v in input_size)
    patch = int(cfg.model.backbone.get('patch_size', 16))
    if h <= 0 or w <= 0 or h % patch or w % patch:
        raise ValueError(
            f'input_size={tuple(input_size)} must be positive multiples of '
            f'the patch size {patch} (H, W), e.g. (1024, 768) or (256, 192).')
    pipeline = cfg.test_dataloader.dataset.pipeline
    if task == 'pose':
        codec = cfg.model.head.decoder
        (in_w, in_h), (hm_w, hm_h) = codec['input_size'], codec['heatmap_size']
        stride = in_w // hm_w
        if in_w != stride * hm_w or in_h != stride * hm_h or h % stride or \
                w % stride:
            raise ValueError(
                f'input_size={tuple(input_size)} must be a multiple of the '
                f'heatmap stride {stride}.')
        codec['input_size'] = (w, h)
        codec['heatmap_size'] = (w // stride, h // stride)
        step = (find_pipeline_step(pipeline, 'TopdownAffine')
                or find_pipeline_step(pipeline, 'Sapiens2TopdownAffine'))
        if step is None:
            raise ValueError('The pose test pipeline has no TopdownAffine '
                             'step to set the input size in.')
        step['input_size'] = (w, h)
        if 'codec' in cfg:
            cfg.codec = copy.deepcopy(codec)
    else:
        pad = find_pipeline_step(pipeline, 'ResizePadImage')  # Sapiens2
        step = (find_pipeline_step(pipeline, 'Resize')
                or find_pipeline_step(pipeline, 'AreaCubicResize'))
        if pad is not None:
            pad['size'] = (h, w)
        elif step is None or step.get('keep_ratio', False):
            raise ValueError(
                'The test pipeline needs a Resize(keep_ratio=False) step to '
                'run the model at a fixed input size.')
        else:
            step['scale'] = (w, h)
        cfg.model.data_preprocessor.size = (h, w)
        featmap = cfg.model.decode_head.get('featmap_size')
        if featmap is not None and tuple(featmap) != (h // patch,
                                                      w // patch):
            raise ValueError(
                f'This pointmap head only runs at '
                f'{featmap[0] * patch}x{featmap[1] * patch} (its scale '
                f'branch flattens a {tuple(featmap)} feature map); '
                f'input_size={tuple(input_size)} cannot be used.')
    if train:
        cfg.model.backbone.img_size = (h, w)
        for key in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
            loader = cfg.get(key)
            for t in (loader.dataset.pipeline if loader else []):
                name = _step_name(t)
                if name in ('RandomResize', 'Resize', 'AreaCubicResize',
                            'MattingResize'):
                    t['scale'] = (w, h)
                elif name == 'ResizePadImage':
                    t['size'] = (h, w)
                elif name == 'RandomCrop':
                    t['crop_size'] = (h, w)
                elif name in ('TopdownAffine', 'Sapiens2TopdownAffine'):
                    t['input_size'] = (w, h)
                elif name == 'GenerateTarget':
                    t['encoder'] = copy.deepcopy(cfg.model.head.decoder)
    return cfg


def check_batch_size(batch_size) -> int:
    """``batch_size`` if it is a positive int (not a bool).

    Raises:
        ValueError: It is not.
    """
    if isinstance(batch_size, bool) or not isinstance(
            batch_size, int) or batch_size < 1:
        raise ValueError(f'batch_size must be a positive int, got '
                         f'{batch_size!r}.')
    return batch_size


def resolve_device_and_dtype(
        device: Union[None, str, torch.device],
        dtype: Union[str, torch.dtype]) -> Tuple[torch.device, torch.dtype]:
    """The device and precision an inferencer runs at.

    Args:
        device: ``'cpu'``, ``'cuda'``, ``'cuda:1'``... None: CUDA where
            available, else the CPU.
        dtype: A name of :data:`~sapiens_mm.tasks.DTYPES`, a
            ``torch.dtype``, or ``'auto'``: :func:`auto_dtype` for the
            device (the choice is logged once per device kind).

    Raises:
        RuntimeError: CUDA asked for but not available.
        ValueError: An unknown precision.
    """
    if device is None:
        device = 'cuda' if torch.cuda.is_available() else 'cpu'
    device = torch.device(device)
    if device.type == 'cuda' and not torch.cuda.is_available():
        raise RuntimeError(f'device={str(device)!r} but CUDA is not '
                           'available; use device="cpu".')
    if isinstance(dtype, str) and dtype == 'auto':
        dtype = auto_dtype(device)
        if (device.type, dtype) not in _LOGGED_AUTO:
            _LOGGED_AUTO.add((device.type, dtype))
            print_log(
                f'dtype auto: {str(dtype)[6:]} on {device.type} (' +
                ('the hardware has native bf16' if dtype == torch.bfloat16
                 else 'no native bf16: emulated bf16 would be slower') + ')',
                logger='current')
    dtype = resolve_dtype(dtype)
    if device.type == 'cpu':
        log_cpu_dtype_advice(dtype)
    if dtype == torch.float16 and device.type == 'cpu':
        print_log('fp16 on CPU is slow and not more accurate; bf16 is the '
                  'usual reduced precision there.', logger='current',
                  level=logging.WARNING)
    return device, dtype


_LOGGED_AUTO: set = set()


def auto_dtype(device: Union[str, torch.device]) -> torch.dtype:
    """bf16 where the hardware computes it natively (a CPU with AVX512_BF16
    or AMX-BF16, an ARM CPU with BF16: see
    :func:`sapiens_mm.utils.cpu_features.cpu_has_native_bf16`; a CUDA GPU
    with bf16 support), else float32: there bf16
    matmuls are emulated and slower than float32 (about 4x on an AVX2
    CPU)."""
    kind = torch.device(device).type
    if kind == 'cuda':
        native = torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    else:
        native = kind == 'cpu' and cpu_has_native_bf16()
    return torch.bfloat16 if native else torch.float32


def autocast(device: Union[str, torch.device], dtype: torch.dtype):
    """``torch.autocast`` to ``dtype`` on ``device`` (a no-op for fp32)."""
    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=dtype)
