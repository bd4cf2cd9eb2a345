"""Recognise official Sapiens checkpoints and map them to shipped configs.

A released Sapiens task checkpoint carries its task and size in its file
name (``sapiens_0.3b_goliath_best_goliath_AP_573.pth`` is 0.3b, 308-keypoint
pose; ``sapiens_1b_render_people_epoch_88.pth`` is 1b depth). When a file has
been renamed, the same facts are read from its weights: the head's key names
and output channels give the task (pose ``head.final_layer`` with 17 / 133 /
308 keypoints, ``decode_head.conv_seg`` with 28 / 20 classes for body parts,
1 channel and four deconvolutions for depth, 3 channels for normals) and the
patch-embedding width gives the size. Either way the result names the config
under ``configs/`` that builds the matching model.

Sapiens2 task files are named ``sapiens2_<size>_<task>.safetensors``
(``sapiens2_0.4b_pose.safetensors``; sizes 0.4b / 0.8b / 1b / 5b, tasks pose,
seg, normal, pointmap, matting (1b only), plus albedo for models trained
here); their weights tell them apart from v1 by the register tokens
(``backbone.storage_tokens``) and the Sapiens2 head names (``conv_pose``,
``conv_seg`` with 29 classes, ``conv_normal``, ``conv_pointmap``,
``conv_albedo``, ``conv_matting`` with 4 outputs). Their configs live under
``configs/sapiens2/``.

Checkpoint files are read only through :mod:`sapiens_mm.checkpoint`.
"""
import os.path as osp
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Union

import torch
from mmengine.logging import print_log

from sapiens_mm.checkpoint import get_state_dict, load_file

from .cards import index_root

__all__ = [
    'SapiensModelInfo', 'UnrecognizedCheckpointError', 'EMBED_DIMS_TO_SIZE',
    'SAPIENS2_EMBED_DIMS_TO_SIZE', 'config_root', 'config_path', 'get_config',
    'shipped_config', 'parse_checkpoint_name', 'recognize_state_dict',
    'recognize_checkpoint', 'with_official_dataset_meta'
]


#: Backbone width (``backbone.patch_embed.projection.weight`` rows) -> size.
EMBED_DIMS_TO_SIZE: Dict[int, str] = {
    1024: '0.3b',
    1280: '0.6b',
    1536: '1b',
    1920: '2b',
    64: 'tiny',
}

#: Sapiens2 backbone width -> size (the sizes with task models).
SAPIENS2_EMBED_DIMS_TO_SIZE: Dict[int, str] = {
    1024: '0.4b',
    1280: '0.8b',
    1536: '1b',
    2432: '5b',
    64: 'tiny',
}

#: Heatmap channels -> pose keypoint layout.
_POSE_DATASETS = {17: 'coco', 133: 'coco_wholebody', 308: 'goliath'}
#: Classes -> body-part vocabulary.
_SEG_DATASETS = {28: 'goliath', 20: 'lip'}

#: (task, dataset) -> config path under ``configs/``.
_CONFIG_TEMPLATES = {
    ('pose', 'goliath'): 'pose/goliath/sapiens_{size}-210e_goliath-{res}.py',
    ('pose', 'coco'): 'pose/coco/sapiens_{size}-210e_coco-{res}.py',
    ('pose', 'coco_wholebody'):
    'pose/coco_wholebody/sapiens_{size}-210e_coco_wholebody-{res}.py',
    ('seg', 'goliath'): 'seg/goliath/sapiens_{size}-200e_goliath-{res}.py',
    ('seg', 'lip'): 'seg/lip/sapiens_{size}-400e_lip-{res}.py',
    ('depth', None): 'depth/sapiens_{size}-200e_depth_folder-{res}.py',
    ('normal', None): 'normal/sapiens_{size}-200e_normal_folder-{res}.py',
}

#: Sapiens2 task -> config path under ``configs/``.
_SAPIENS2_TEMPLATES = {
    'pose': 'sapiens2/pose/sapiens2_{size}-goliath-{res}.py',
    'seg': 'sapiens2/seg/sapiens2_{size}-dome29-{res}.py',
    'normal': 'sapiens2/normal/sapiens2_{size}-normal_folder-{res}.py',
    'pointmap': 'sapiens2/pointmap/sapiens2_{size}-pointmap_folder-{res}.py',
    'albedo': 'sapiens2/albedo/sapiens2_{size}-albedo_folder-{res}.py',
    'matting':
    'sapiens2/matting/sapiens2_{size}_matting_gss_p3m_metasim-{res}.py',
}
#: Sapiens2 head output layer -> task (keys under ``decode_head.``, or
#: ``head.`` for a pose model saved in this project's layout).
_SAPIENS2_HEADS = {
    'conv_pose': 'pose',
    'conv_seg': 'seg',
    'conv_normal': 'normal',
    'conv_pointmap': 'pointmap',
    'conv_albedo': 'albedo',
    'conv_matting': 'matting',
}
#: Output channels of each Sapiens2 head (3 where not listed).
_SAPIENS2_OUT_CHANNELS = dict(pose=308, seg=29, matting=4)
_SAPIENS2_NAME = re.compile(
    r'^sapiens2_(?P<size>0\.4b|0\.8b|1b|5b|tiny)_'
    r'(?P<task>pose|seg|normal|pointmap|albedo|matting)$')
_SAPIENS2_PRETRAIN_NAME = re.compile(
    r'^sapiens2_(0\.1b|0\.4b|0\.8b|1b|1b_4k|5b)_pretrain$')

_SIZE = r'(?P<size>0\.3b|0\.6b|1b|2b|tiny)'
# Official release names (see the Sapiens model zoo). Order matters: the
# more specific patterns come first.
_NAME_PATTERNS = [
    (re.compile(rf'^sapiens_{_SIZE}_goliath_best_goliath_miou'), 'seg',
     'goliath'),
    (re.compile(rf'^sapiens_{_SIZE}_(lip|cihp)_best_(lip|cihp)_miou'), 'seg',
     'lip'),
    (re.compile(rf'^sapiens_{_SIZE}_coco_wholebody_best_coco_wholebody_ap'),
     'pose', 'coco_wholebody'),
    (re.compile(rf'^sapiens_{_SIZE}_coco_best_coco_ap'), 'pose', 'coco'),
    (re.compile(rf'^sapiens_{_SIZE}_goliath_best_goliath_ap'), 'pose',
     'goliath'),
    (re.compile(rf'^sapiens_{_SIZE}_normal_render_people_epoch'), 'normal',
     None),
    (re.compile(rf'^sapiens_{_SIZE}_render_people_epoch'), 'depth', None),
]
_PRETRAIN_NAME = re.compile(rf'^sapiens_{_SIZE}_epoch_\d+(_clean)?$')

_EXAMPLES = ('sapiens_0.3b_goliath_best_goliath_AP_573.pth (pose), '
             'sapiens_0.3b_goliath_best_goliath_mIoU_7673_epoch_194.pth '
             '(seg), sapiens_0.3b_render_people_epoch_100.pth (depth), '
             'sapiens_0.3b_normal_render_people_epoch_66.pth (normal), '
             'sapiens2_0.4b_pose.safetensors (Sapiens2; also seg, normal, '
             'pointmap)')


class UnrecognizedCheckpointError(ValueError):
    """The task or size of a checkpoint cannot be told."""


@dataclass(frozen=True)
class SapiensModelInfo:
    """What a Sapiens task checkpoint holds.

    Attributes:
        task: ``'pose'``, ``'seg'``, ``'depth'`` or ``'normal'``; Sapiens2
            also ``'pointmap'``, ``'albedo'`` and ``'matting'``.
        size: ``'0.3b'``, ``'0.6b'``, ``'1b'``, ``'2b'`` or ``'tiny'``;
            Sapiens2: ``'0.4b'``, ``'0.8b'``, ``'1b'``, ``'5b'`` or
            ``'tiny'``.
        dataset: Keypoint layout (``'goliath'``, ``'coco'``,
            ``'coco_wholebody'``) for pose, vocabulary (``'goliath'`` 28
            classes, ``'lip'`` 20 classes) for seg, None for depth / normal.
            Sapiens2: ``'goliath'`` (308 keypoints) for pose, ``'dome29'``
            for seg, None otherwise.
        source: ``'name'``, ``'keys'`` or ``'registry'``: what the facts
            were read from (the file name, the weights, a registry model).
        version: 1 (Sapiens) or 2 (Sapiens2).
        name: The registry name of a registry model (``source ==
            'registry'``), else None.
    """
    task: str
    size: str
    dataset: Optional[str] = None
    source: str = 'name'
    version: int = 1
    name: Optional[str] = None

    @property
    def config(self) -> Path:
        """The shipped config that builds this model."""
        return shipped_config(self.task, self.size, self.dataset,
                              self.version)


def config_root() -> Path:
    """The folder of the shipped configs.

    An installed wheel carries them inside the package
    (``sapiens_mm/.mim/configs``, OpenMMLab's convention); a source checkout
    (and an editable install of it) has them in ``configs/`` next to the
    package (see :func:`sapiens_mm.zoo.cards.index_root`).

    Raises:
        FileNotFoundError: Neither exists.
    """
    return index_root() / 'configs'


def config_path(name: str) -> Path:
    """The shipped config called ``name``.

    Args:
        name: A config file name with or without ``.py``
            (``'sapiens_0.3b-210e_goliath-1024x768'``), or its path under the
            configs folder (``'pose/goliath/sapiens_0.3b-210e_goliath-1024x768'``).

    Returns:
        Absolute path of the config file.

    Raises:
        FileNotFoundError: No shipped config has that name (the message
            lists close names).
        ValueError: Several configs have that file name (give the path).
    """
    root = config_root()
    stem = name[:-3] if name.endswith('.py') else name
    direct = root / f'{stem}.py'
    if '/' in stem and direct.is_file() and '_base_' not in direct.parts:
        return direct
    found = sorted(p for p in root.rglob(f'{Path(stem).name}.py')
                   if '_base_' not in p.relative_to(root).parts)
    if len(found) > 1:
        raise ValueError(
            f'Several shipped configs are called {name!r}: '
            f'{[str(p.relative_to(root)) for p in found]}; give the path '
            'under configs/.')
    if not found:
        import difflib
        names = sorted(p.stem for p in root.rglob('*.py')
                       if '_base_' not in p.relative_to(root).parts)
        close = difflib.get_close_matches(Path(stem).name, names, n=3)
        raise FileNotFoundError(
            f'No shipped config is called {name!r}'
            + (f'; did you mean {close}?' if close else '.')
            + f' The configs are under {root}.')
    return found[0]


def get_config(name: str):
    """The shipped config called ``name``, loaded
    (:class:`mmengine.config.Config`); see :func:`config_path`.

    Example:
        >>> cfg = get_config('sapiens_0.3b-210e_goliath-1024x768')
        >>> cfg.model.backbone.arch
        'sapiens_0.3b'
    """
    from mmengine.config import Config
    return Config.fromfile(str(config_path(name)))


def shipped_config(task: str, size: str,
                   dataset: Optional[str] = None,
                   version: int = 1) -> Path:
    """Path of the config that builds a ``task`` model of ``size``.

    Args:
        task: ``'pose'``, ``'seg'``, ``'depth'`` or ``'normal'``; Sapiens2:
            ``'pose'``, ``'seg'``, ``'normal'``, ``'pointmap'``, ``'albedo'``,
            ``'matting'``.
        size: ``'0.3b'``, ``'0.6b'``, ``'1b'``, ``'2b'`` or ``'tiny'``;
            Sapiens2: ``'0.4b'``, ``'0.8b'``, ``'1b'``, ``'5b'``, ``'tiny'``.
        dataset: Pose layout (``'goliath'``, ``'coco'``,
            ``'coco_wholebody'``) or seg vocabulary (``'goliath'``,
            ``'lip'``); ignored for depth / normal and for Sapiens2 (one
            dataset per task). Defaults to ``'goliath'`` for pose and seg.
        version: 1 (Sapiens, default) or 2 (Sapiens2).

    Returns:
        Absolute path of the config file.

    Raises:
        ValueError: Unknown task / size / dataset.
        FileNotFoundError: The config does not exist.
    """
    if version == 2:
        return _sapiens2_config(task, size)
    if version != 1:
        raise ValueError(f'version must be 1 (Sapiens) or 2 (Sapiens2), got '
                         f'{version!r}.')
    if task in ('depth', 'normal'):
        dataset = None
    elif dataset is None:
        dataset = 'goliath'
    key = (task, dataset)
    if key not in _CONFIG_TEMPLATES:
        known = ', '.join(f'{t}/{d}' if d else t for t, d in _CONFIG_TEMPLATES)
        raise ValueError(f'No shipped config for task {task!r} with dataset '
                         f'{dataset!r}; known: {known}.')
    if size not in EMBED_DIMS_TO_SIZE.values():
        raise ValueError(f'Unknown Sapiens size {size!r}; choose from '
                         f'{sorted(EMBED_DIMS_TO_SIZE.values())}.')
    return _existing_config(_CONFIG_TEMPLATES[key], task, size)


def _sapiens2_config(task: str, size: str) -> Path:
    if task not in _SAPIENS2_TEMPLATES:
        raise ValueError(f'No Sapiens2 config for task {task!r}; known: '
                         f'{", ".join(_SAPIENS2_TEMPLATES)}.')
    if size not in SAPIENS2_EMBED_DIMS_TO_SIZE.values():
        raise ValueError(
            f'Unknown Sapiens2 task-model size {size!r}; choose from '
            f'{sorted(SAPIENS2_EMBED_DIMS_TO_SIZE.values())}.')
    return _existing_config(_SAPIENS2_TEMPLATES[task], task, size)


def _existing_config(template: str, task: str, size: str) -> Path:
    res = '256x192' if size == 'tiny' else '1024x768'
    path = config_root() / template.format(size=size, res=res)
    if not path.is_file():
        raise FileNotFoundError(
            f'Expected the config {path} for a {size} {task} model; it is '
            'missing from this installation. Pass a config file explicitly.')
    return path


def _stem(path: Union[str, Path]) -> str:
    name = osp.basename(str(path))
    for ext in ('.pth', '.pt', '.pt2', '.ckpt', '.bin', '.safetensors'):
        if name.lower().endswith(ext):
            name = name[:-len(ext)]
            break
    return name


def parse_checkpoint_name(
        path: Union[str, Path]) -> Optional[SapiensModelInfo]:
    """Recognise an official Sapiens task checkpoint by its file name.

    Args:
        path: File path or name, e.g.
            ``sapiens_1b_coco_wholebody_best_coco_wholebody_AP_727.pth``.

    Returns:
        The model info, or None when the name is not an official one.

    Raises:
        UnrecognizedCheckpointError: The name is that of an official file
            this package cannot run (a pretraining checkpoint without a task
            head, or a TorchScript / exported "lite" file).
    """
    name = osp.basename(str(path))
    stem = _stem(name).lower()
    m = _SAPIENS2_NAME.match(stem)
    if m:
        task = m.group('task')
        dataset = dict(pose='goliath', seg='dome29').get(task)
        return SapiensModelInfo(task, m.group('size'), dataset, 'name', 2)
    if _SAPIENS2_PRETRAIN_NAME.match(stem):
        raise UnrecognizedCheckpointError(
            f'{name} is a Sapiens2 pretraining (backbone-only) checkpoint: '
            'it has no task head to run. Use it as the backbone init of a '
            'configs/sapiens2/ fine-tuning config, or pick a task file such '
            'as sapiens2_0.4b_pose.safetensors.')
    lite = re.search(r'_(torchscript|bfloat16)$', stem)
    if lite or name.lower().endswith('.pt2'):
        raise UnrecognizedCheckpointError(
            f'{name} is a Sapiens-lite {lite.group(1) if lite else "exported"}'
            ' file (a compiled graph, not weights); it cannot be loaded into '
            'an OpenMMLab model. Use the .pth checkpoint of the same name '
            'without the suffix.')
    if _PRETRAIN_NAME.match(stem):
        raise UnrecognizedCheckpointError(
            f'{name} is a Sapiens pretraining (backbone-only) checkpoint: it '
            'has no task head to run. Use it as the backbone init of a '
            'fine-tuning config, or pick a task checkpoint such as '
            f'{_EXAMPLES}.')
    for pattern, task, dataset in _NAME_PATTERNS:
        m = pattern.match(stem)
        if m:
            return SapiensModelInfo(task, m.group('size'), dataset, 'name')
    return None


def _out_channels(state: Mapping[str, torch.Tensor], key: str) -> int:
    return int(state[key].shape[0])


def recognize_state_dict(state: Mapping[str, torch.Tensor],
                         source: str = 'checkpoint') -> SapiensModelInfo:
    """Recognise a Sapiens task model from its weights.

    Args:
        state: A full-model state dict (keys ``backbone.*`` and ``head.*``
            or ``decode_head.*``), as in the official task checkpoints.
        source: Name of the file, for error messages.

    Returns:
        The model info (``source='keys'``).

    Raises:
        UnrecognizedCheckpointError: Task or size cannot be told; the message
            says what was found and what to do.
    """
    embed_key = 'backbone.patch_embed.projection.weight'
    if embed_key not in state:
        if 'patch_embed.projection.weight' in state:
            raise UnrecognizedCheckpointError(
                f'{source} is a backbone-only (pretraining "clean") state '
                'dict: it has no task head to run. Pick a task checkpoint '
                f'such as {_EXAMPLES}.')
        raise UnrecognizedCheckpointError(
            f'{source} is not a Sapiens task checkpoint: it has no '
            f'{embed_key!r} (first keys: {list(state)[:5]}). Pass a config '
            'together with it: models={"pose": dict(config=..., '
            'checkpoint=...)}.')
    embed_dims = _out_channels(state, embed_key)
    if 'backbone.storage_tokens' in state:
        return _recognize_sapiens2(state, embed_dims, source)
    size = EMBED_DIMS_TO_SIZE.get(embed_dims)
    if size is None:
        raise UnrecognizedCheckpointError(
            f'{source}: backbone width {embed_dims} is none of the Sapiens '
            f'sizes {EMBED_DIMS_TO_SIZE}. Pass the config of this model '
            'together with the checkpoint.')
    if 'head.final_layer.weight' in state:
        k = _out_channels(state, 'head.final_layer.weight')
        if k not in _POSE_DATASETS:
            raise UnrecognizedCheckpointError(
                f'{source}: a pose head with {k} keypoints; only '
                f'{sorted(_POSE_DATASETS)} (COCO, COCO-WholeBody, Goliath) '
                'have shipped configs. Pass your config with the checkpoint.')
        return SapiensModelInfo('pose', size, _POSE_DATASETS[k], 'keys')
    if 'decode_head.conv_seg.weight' in state:
        c = _out_channels(state, 'decode_head.conv_seg.weight')
        deconvs = {
            k.split('.')[2]
            for k in state if k.startswith('decode_head.deconv_layers.')
        }
        if c == 1:
            if len(deconvs) != 4:
                raise UnrecognizedCheckpointError(
                    f'{source}: a 1-channel head with {len(deconvs)} '
                    'deconvolutions; the Sapiens depth head has 4. Pass the '
                    'config of this model together with the checkpoint.')
            return SapiensModelInfo('depth', size, None, 'keys')
        if c == 3:
            return SapiensModelInfo('normal', size, None, 'keys')
        if c in _SEG_DATASETS:
            return SapiensModelInfo('seg', size, _SEG_DATASETS[c], 'keys')
        raise UnrecognizedCheckpointError(
            f'{source}: a decode head with {c} output channels; Sapiens '
            'heads have 1 (depth), 3 (normal), 28 (Goliath parts) or 20 '
            '(LIP / CIHP parts). Pass the config of this model together '
            'with the checkpoint.')
    raise UnrecognizedCheckpointError(
        f'{source}: a Sapiens backbone without a known head (no '
        '"head.final_layer" or "decode_head.conv_seg" weights). Pass the '
        'config of this model together with the checkpoint.')


def _recognize_sapiens2(state: Mapping[str, torch.Tensor], embed_dims: int,
                        source: str) -> SapiensModelInfo:
    """A Sapiens2 task model (it has register tokens) from its head keys."""
    size = SAPIENS2_EMBED_DIMS_TO_SIZE.get(embed_dims)
    if size is None:
        raise UnrecognizedCheckpointError(
            f'{source}: Sapiens2 backbone width {embed_dims} is none of the '
            f'sizes with task models {SAPIENS2_EMBED_DIMS_TO_SIZE}. Pass the '
            'config of this model together with the checkpoint.')
    for layer, task in _SAPIENS2_HEADS.items():
        key = next((f'{prefix}.{layer}.weight'
                    for prefix in ('decode_head', 'head')
                    if f'{prefix}.{layer}.weight' in state), None)
        if key is None:
            continue
        channels = _out_channels(state, key)
        expected = _SAPIENS2_OUT_CHANNELS.get(task, 3)
        if channels != expected:
            raise UnrecognizedCheckpointError(
                f'{source}: a Sapiens2 {task} head with {channels} outputs; '
                f'the shipped {task} config has {expected}. Pass the config '
                'of this model together with the checkpoint.')
        dataset = dict(pose='goliath', seg='dome29').get(task)
        return SapiensModelInfo(task, size, dataset, 'keys', 2)
    raise UnrecognizedCheckpointError(
        f'{source}: a Sapiens2 backbone without a known head (none of '
        f'{sorted(_SAPIENS2_HEADS)} under decode_head.). Pass the config of '
        'this model together with the checkpoint.')


def recognize_checkpoint(
        path: Union[str, Path],
        state_dict: Optional[Mapping[str, torch.Tensor]] = None
) -> SapiensModelInfo:
    """Recognise the task and size of a Sapiens checkpoint file.

    The official file name is tried first (no file read); otherwise the file
    is read (through :func:`sapiens_mm.checkpoint.load_file`) and its keys
    and shapes decide.

    Args:
        path: The checkpoint file.
        state_dict: Its state dict if already loaded (avoids a second read).

    Returns:
        The model info; ``info.config`` is the shipped config to build it.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        UnrecognizedCheckpointError: Neither the name nor the weights tell
            the task and size.
    """
    info = parse_checkpoint_name(path)
    if info is not None:
        return info
    if state_dict is None:
        state_dict = get_state_dict(load_file(str(path)))
    return recognize_state_dict(state_dict, source=str(path))


def with_official_dataset_meta(path: Union[str, Path], checkpoint: Any) -> Any:
    """``checkpoint`` with the ``meta.dataset_meta`` an official Sapiens task
    checkpoint lacks.

    The official files carry no ``dataset_meta`` (Sapiens2's safetensors no
    ``meta`` at all), so stock front ends fall back to Cityscapes' class
    names (``MMSegInferencer``) or fail (``mmseg.apis.init_model`` reads
    ``checkpoint['meta']``). When the file is recognised (by its name or,
    failing that, its weights; see :func:`recognize_checkpoint`), the
    metadata of its shipped config is added: class names, palette and
    vocabulary (seg), keypoint metainfo (pose), the task name (others).
    mmengine's local-file loader calls this (see
    :func:`sapiens_mm.zoo.loader.register_mmengine_loaders`), so every stock
    front end gets it. Nothing is written to the file.

    Args:
        path: Where ``checkpoint`` was read from.
        checkpoint: What was read: a dict with ``state_dict`` (and maybe
            ``meta``) or a flat state dict.

    Returns:
        ``checkpoint`` itself when it has a ``dataset_meta`` or is not a
        recognised Sapiens task model; else a new dict (``state_dict`` plus
        ``meta`` with ``dataset_meta``, the other entries kept).
    """
    if not isinstance(checkpoint, Mapping):
        return checkpoint
    wrapped = 'state_dict' in checkpoint
    meta = checkpoint.get('meta') if wrapped else None
    if wrapped and not (meta is None or isinstance(meta, Mapping)):
        return checkpoint
    if meta is not None and 'dataset_meta' in meta:
        return checkpoint
    state = checkpoint['state_dict'] if wrapped else checkpoint
    if not isinstance(state, Mapping) or not all(
            isinstance(v, torch.Tensor) for v in state.values()):
        return checkpoint
    try:
        info = recognize_checkpoint(path, state)
    except UnrecognizedCheckpointError:
        return checkpoint
    from mmengine.config import Config

    from sapiens_mm.datasets.dataset_meta import dataset_meta_of_config
    dataset_meta = dataset_meta_of_config(Config.fromfile(str(info.config)))
    print_log(
        f'{path}: an official Sapiens{" 2" if info.version == 2 else ""} '
        f'{info.task} checkpoint without dataset_meta; using the metadata of '
        f'its shipped config {info.config.name} '
        f'({", ".join(sorted(dataset_meta))}).', logger='current')
    out = dict(checkpoint) if wrapped else dict(state_dict=state)
    out['meta'] = dict(meta or {}, dataset_meta=dataset_meta)
    return out
