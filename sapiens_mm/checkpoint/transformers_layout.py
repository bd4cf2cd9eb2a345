"""The Hugging Face Transformers layout of Sapiens2 checkpoints.

Transformers (5.10 and later) has its own Sapiens2 port
(``transformers.Sapiens2Model`` / ``Sapiens2For{PoseEstimation,
SemanticSegmentation,NormalEstimation,PointmapEstimation,ImageMatting}``),
and the official Hub repositories carry its files next to the official ones:
a ``config.json`` and a ``model.safetensors``. This module converts between
that layout and the official one (see :mod:`.sapiens2_layout`), reading only
the JSON config and the tensors (nothing is executed):

==================================================  =========================================
Transformers                                        official
==================================================  =========================================
``model.`` (task models; none for Sapiens2Model)    ``backbone.`` (none for a backbone file)
``embeddings.cls_token`` / ``.register_tokens``     ``cls_token`` / ``storage_tokens``
``embeddings.patch_embeddings.*``                   ``patch_embed.projection.*``
``model.layer.i.norm1`` / ``norm2``                 ``blocks.i.ln1`` / ``ln2``
``model.layer.i.attention.{q,k,v,o}_proj.*``        ``blocks.i.attn.{wq,wk,wv,proj}.*``
``model.layer.i.attention.{q,k}_norm.*``            ``blocks.i.attn.{q,k}_norm.*``
``model.layer.i.layer_scale1.lambda1``              ``blocks.i.attn.gamma.weight``
``model.layer.i.mlp.gate_proj`` + ``up_proj``       ``blocks.i.ffn.w12`` (concatenated, gate
                                                    first: it gets the SiLU)
``model.layer.i.mlp.down_proj.*``                   ``blocks.i.ffn.w3.*``
``norm.weight``                                     ``ln1.weight`` (the final norm)
(not saved: computed from ``rope_theta``)           ``rope_embed.periods``
``decode_head.upsample_layers.j.convolution``       pose / seg: ``decode_head.deconv_layers.{3j}``;
                                                    others: ``decode_head.upsample_blocks.j.0``
``decode_head.conv_layers.j.convolution``           ``decode_head.conv_layers.{3j}``
``decode_head.input_conv.convolution``              ``decode_head.input_conv.0``
``decode_head.predictor``                           ``decode_head.conv_{pose,seg,normal,...}``
``scale_head.conv_layers.j.convolution``            ``decode_head.scale_conv_layers.{3j}``
``scale_head.predictor.{block1.layers.0,``          ``decode_head.scale_final_layer.{1,3,5}``
``block2.layers.0,proj}``
==================================================  =========================================

:func:`to_transformers_layout` also writes the ``config.json`` that makes
``Sapiens2For*.from_pretrained`` build the same network: sizes read from the
weights, the per-block key/value heads listed explicitly (Transformers'
default of 8 for every GQA block is wrong for 1b and 5b),
``normalize_backbone_outputs=False`` and ``pos_embed_rescale=None`` (the
official behaviour).
"""
import json
import os
import os.path as osp
import re
from collections import OrderedDict
from typing import Dict, Optional, Tuple

import torch

from .safetensors_io import load_safetensors, save_safetensors
from .sapiens2_layout import official_head_keys

__all__ = [
    'TRANSFORMERS_ARCHITECTURES', 'is_transformers_state_dict',
    'is_transformers_folder', 'load_transformers_checkpoint',
    'from_transformers_layout', 'to_transformers_layout',
    'save_transformers_checkpoint'
]

#: Transformers class -> task (the official head's output layer is
#: ``conv_<task>``); None: the backbone alone (official pretrain layout).
TRANSFORMERS_ARCHITECTURES = {
    'Sapiens2ForPoseEstimation': 'pose',
    'Sapiens2ForSemanticSegmentation': 'seg',
    'Sapiens2ForNormalEstimation': 'normal',
    'Sapiens2ForPointmapEstimation': 'pointmap',
    'Sapiens2ForImageMatting': 'matting',
    'Sapiens2Model': None,
    'Sapiens2Backbone': None,
}
_ARCH_OF_TASK = {
    t: a
    for a, t in TRANSFORMERS_ARCHITECTURES.items() if t is not None
}
_DECONV_TASKS = ('pose', 'seg')
CONFIG_NAME, WEIGHTS_NAME = 'config.json', 'model.safetensors'

# backbone key renames, Transformers -> official (applied to the part
# after the block prefix)
_BLOCK = [
    ('norm1.', 'ln1.'), ('norm2.', 'ln2.'),
    ('attention.q_proj.', 'attn.wq.'), ('attention.k_proj.', 'attn.wk.'),
    ('attention.v_proj.', 'attn.wv.'), ('attention.o_proj.', 'attn.proj.'),
    ('attention.q_norm.', 'attn.q_norm.'),
    ('attention.k_norm.', 'attn.k_norm.'),
    ('layer_scale1.lambda1', 'attn.gamma.weight'),
    ('mlp.down_proj.', 'ffn.w3.'),
]
_TOP = [
    ('embeddings.cls_token', 'cls_token'),
    ('embeddings.register_tokens', 'storage_tokens'),
    ('embeddings.patch_embeddings.', 'patch_embed.projection.'),
    ('norm.weight', 'ln1.weight'),
]


def is_transformers_state_dict(state: Dict[str, torch.Tensor]) -> bool:
    """Whether ``state`` is in the Transformers Sapiens2 layout."""
    return any(k in state for k in ('embeddings.patch_embeddings.weight',
                                    'model.embeddings.patch_embeddings.weight'))


def is_transformers_folder(path: str) -> bool:
    """Whether ``path`` is a folder with ``config.json`` and
    ``model.safetensors`` (a Transformers ``save_pretrained`` folder)."""
    return osp.isdir(path) and osp.isfile(osp.join(path, CONFIG_NAME)) and \
        osp.isfile(osp.join(path, WEIGHTS_NAME))


def _read_config(path: str) -> dict:
    try:
        with open(path, encoding='utf-8') as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f'Cannot read the Transformers config {path}: {e}.'
                         ) from None
    if not isinstance(config, dict):
        raise ValueError(f'{path} is not a Transformers config (a JSON '
                         'object).')
    return config


def _task_of_config(config: dict, source: str) -> Optional[str]:
    archs = config.get('architectures') or []
    for arch in archs:
        if arch in TRANSFORMERS_ARCHITECTURES:
            return TRANSFORMERS_ARCHITECTURES[arch]
    if config.get('model_type') not in (None, 'sapiens2'):
        raise ValueError(
            f'{source} is a Transformers {config.get("model_type")!r} model, '
            'not Sapiens2.')
    raise ValueError(f'{source}: architectures {archs} name none of '
                     f'{sorted(TRANSFORMERS_ARCHITECTURES)}.')


def _guess_task(state: Dict[str, torch.Tensor]) -> Optional[str]:
    """The task of a Transformers-layout state dict without its config."""
    if not any(k.startswith('decode_head.') for k in state):
        return None
    if any(k.startswith('scale_head.') for k in state):
        return 'pointmap'
    out = state['decode_head.predictor.weight'].shape[0]
    if 'decode_head.input_conv.convolution.weight' in state:
        return {3: 'normal', 4: 'matting'}.get(out, 'normal')
    return 'pose' if out == 308 else 'seg'


def from_transformers_layout(state: Dict[str, torch.Tensor],
                             task: Optional[str] = 'auto'
                             ) -> 'OrderedDict[str, torch.Tensor]':
    """Official-layout copy of a Transformers-layout state dict.

    Args:
        state: The tensors of a Transformers ``model.safetensors``.
        task: ``'pose'``, ``'seg'``, ``'normal'``, ``'pointmap'``,
            ``'matting'``, None (a backbone: ``Sapiens2Model``), or
            ``'auto'`` (told from the keys; give it from ``config.json`` when
            you have one).

    Returns:
        ``backbone.*`` + ``decode_head.*`` keys for a task model, the flat
        backbone keys otherwise (``mask_token``, a pretraining-only
        parameter, is dropped).

    Raises:
        ValueError: A key this layout does not have (the message names it).
    """
    if task == 'auto':
        task = _guess_task(state)
    backbone = 'backbone.' if task is not None else ''
    tf_backbone = 'model.' if task is not None else ''
    out: 'OrderedDict[str, torch.Tensor]' = OrderedDict()
    pending: Dict[str, Dict[str, torch.Tensor]] = {}
    for key, value in state.items():
        new = _backbone_key(key, tf_backbone, backbone, value, pending)
        if new is None:
            new = _head_key(key, task)
        if new is None:
            raise ValueError(f'Unexpected key {key!r} for a Transformers '
                             f'Sapiens2 {task or "backbone"} checkpoint.')
        if new:
            out[new] = value
    for prefix, parts in pending.items():
        missing = {'gate', 'up'} - set(parts)
        if missing:
            raise ValueError(f'{prefix}: mlp.{missing.pop()}_proj is missing; '
                             'cannot build ffn.w12.')
        out[prefix] = torch.cat([parts['gate'], parts['up']], dim=0)
    return out


def _backbone_key(key, tf_backbone, backbone, value, pending):
    """Official name of a backbone key ('' to drop it, None: not one)."""
    if not key.startswith(tf_backbone):
        return None
    rest = key[len(tf_backbone):]
    if rest == 'embeddings.mask_token':
        return ''
    for old, new in _TOP:
        if rest.startswith(old):
            return backbone + new + rest[len(old):]
    m = re.fullmatch(r'model\.layer\.(\d+)\.(.+)', rest)
    if m is None:
        return None
    block, tail = f'{backbone}blocks.{m.group(1)}.', m.group(2)
    gate_up = re.fullmatch(r'mlp\.(gate|up)_proj\.(weight|bias)', tail)
    if gate_up:
        pending.setdefault(f'{block}ffn.w12.{gate_up.group(2)}',
                           {})[gate_up.group(1)] = value
        return ''
    for old, new in _BLOCK:
        if tail.startswith(old):
            return block + new + tail[len(old):]
    return None


def _head_key(key: str, task: Optional[str]) -> Optional[str]:
    if task is None:
        return None
    m = re.fullmatch(r'decode_head\.(\w+?)\.(?:(\d+)\.)?convolution\.'
                     r'(weight|bias)', key)
    if m:
        part, j, param = m.groups()
        if part == 'input_conv':
            return f'decode_head.input_conv.0.{param}'
        if part == 'upsample_layers':
            if task in _DECONV_TASKS:
                return f'decode_head.deconv_layers.{3 * int(j)}.{param}'
            return f'decode_head.upsample_blocks.{j}.0.{param}'
        if part == 'conv_layers':
            return f'decode_head.conv_layers.{3 * int(j)}.{param}'
        return None
    m = re.fullmatch(r'decode_head\.predictor\.(weight|bias)', key)
    if m:
        return f'decode_head.conv_{task}.{m.group(1)}'
    m = re.fullmatch(r'scale_head\.conv_layers\.(\d+)\.convolution\.'
                     r'(weight|bias)', key)
    if m:
        return (f'decode_head.scale_conv_layers.{3 * int(m.group(1))}.'
                f'{m.group(2)}')
    m = re.fullmatch(r'scale_head\.predictor\.(block1\.layers\.0|'
                     r'block2\.layers\.0|proj)\.(weight|bias)', key)
    if m:
        index = {'block1.layers.0': 1, 'block2.layers.0': 3, 'proj': 5}
        return (f'decode_head.scale_final_layer.{index[m.group(1)]}.'
                f'{m.group(2)}')
    return None


def load_transformers_checkpoint(path: str, map_location='cpu',
                                 state: Optional[Dict[str, torch.Tensor]] = None
                                 ) -> 'OrderedDict[str, torch.Tensor]':
    """Read a Transformers-layout checkpoint as an official-layout state
    dict.

    Args:
        path: A folder with ``config.json`` and ``model.safetensors``, or the
            ``model.safetensors`` alone (its ``config.json`` is used when it
            sits next to it; otherwise the task is told from the keys). The
            tensors may carry the Transformers module names or, as
            Transformers 5's ``save_pretrained`` writes them, the official
            names (returned as they are).
        map_location: Device of the tensors.
        state: The tensors of ``model.safetensors`` when already read.

    Raises:
        ValueError: Not a Transformers Sapiens2 checkpoint.
    """
    folder = path if osp.isdir(path) else osp.dirname(path)
    weights = osp.join(path, WEIGHTS_NAME) if osp.isdir(path) else path
    config_path = osp.join(folder, CONFIG_NAME)
    if state is None:
        state = load_safetensors(weights, map_location)
    task = 'auto'
    if osp.isfile(config_path):
        task = _task_of_config(_read_config(config_path), config_path)
    if not is_transformers_state_dict(state):
        if any(k.endswith('patch_embed.projection.weight') for k in state):
            # Transformers 5's save_pretrained writes the official names
            # back (its conversion mapping runs both ways)
            return OrderedDict(state)
        raise ValueError(f'{weights} is not a Sapiens2 checkpoint (no '
                         'embeddings.patch_embeddings or '
                         'patch_embed.projection weights).')
    return from_transformers_layout(state, task)


def _official_task(state: Dict[str, torch.Tensor]) -> Optional[str]:
    for key in state:
        m = re.fullmatch(r'decode_head\.conv_(pose|seg|normal|pointmap|'
                         r'matting)\.weight', key)
        if m:
            return m.group(1)
    if any(k.startswith('decode_head.') for k in state):
        raise ValueError('The checkpoint\'s head has no output layer '
                         'Transformers has a class for (conv_pose, conv_seg, '
                         'conv_normal, conv_pointmap, conv_matting).')
    return None


def to_transformers_layout(state: Dict[str, torch.Tensor],
                           image_size: Tuple[int, int] = (1024, 768)
                           ) -> Tuple['OrderedDict[str, torch.Tensor]', dict]:
    """Transformers-layout copy of an official-layout state dict, and the
    ``config.json`` content that builds the matching model.

    Args:
        state: Official layout: ``backbone.*`` + ``decode_head.*`` (a task
            file) or flat backbone keys (a pretrain file). ``head.*`` (this
            project's mmpose estimators) is read as ``decode_head.*``.
        image_size: (H, W) the model is meant for (Transformers' default
            input size; the pointmap scale branch depends on it).

    Raises:
        ValueError: A key without a Transformers counterpart (the albedo
            head, the 4K tokenizer).
    """
    state = official_head_keys(state)
    task = _official_task(state)
    backbone = 'backbone.' if task is not None else ''
    tf_backbone = 'model.' if task is not None else ''
    inverse_top = [(new, old) for old, new in _TOP]
    inverse_block = [(new, old) for old, new in _BLOCK]
    out: 'OrderedDict[str, torch.Tensor]' = OrderedDict()
    for key, value in state.items():
        if key.startswith(backbone) and not key.startswith('decode_head.'):
            rest = key[len(backbone):]
            if rest == 'rope_embed.periods':
                continue  # Transformers recomputes it from rope_theta
            new = next((tf_backbone + n + rest[len(o):]
                        for o, n in inverse_top if rest.startswith(o)), None)
            m = re.fullmatch(r'blocks\.(\d+)\.(.+)', rest)
            if new is None and m is not None:
                block, tail = f'{tf_backbone}model.layer.{m.group(1)}.', \
                    m.group(2)
                w12 = re.fullmatch(r'ffn\.w12\.(weight|bias)', tail)
                if w12:
                    gate, up = value.chunk(2, dim=0)
                    out[f'{block}mlp.gate_proj.{w12.group(1)}'] = gate
                    out[f'{block}mlp.up_proj.{w12.group(1)}'] = up
                    continue
                new = next((block + n + tail[len(o):]
                            for o, n in inverse_block if tail.startswith(o)),
                           None)
            if new is None:
                raise ValueError(f'{key} has no counterpart in the '
                                 'Transformers Sapiens2 model.')
            out[new] = value
            continue
        new = _inverse_head_key(key, task)
        if new is None:
            raise ValueError(f'{key} has no counterpart in the Transformers '
                             f'Sapiens2 {task} model.')
        out[new] = value
    return out, _config(state, task, backbone, image_size)


def _inverse_head_key(key: str, task: str) -> Optional[str]:
    rules = [
        (r'decode_head\.input_conv\.0\.(weight|bias)',
         lambda m: f'decode_head.input_conv.convolution.{m[1]}'),
        (r'decode_head\.deconv_layers\.(\d+)\.(weight|bias)',
         lambda m: f'decode_head.upsample_layers.{int(m[1]) // 3}.'
         f'convolution.{m[2]}'),
        (r'decode_head\.upsample_blocks\.(\d+)\.0\.(weight|bias)',
         lambda m: f'decode_head.upsample_layers.{m[1]}.convolution.{m[2]}'),
        (r'decode_head\.conv_layers\.(\d+)\.(weight|bias)',
         lambda m: f'decode_head.conv_layers.{int(m[1]) // 3}.convolution.'
         f'{m[2]}'),
        (rf'decode_head\.conv_{task}\.(weight|bias)',
         lambda m: f'decode_head.predictor.{m[1]}'),
        (r'decode_head\.scale_conv_layers\.(\d+)\.(weight|bias)',
         lambda m: f'scale_head.conv_layers.{int(m[1]) // 3}.convolution.'
         f'{m[2]}'),
        (r'decode_head\.scale_final_layer\.([135])\.(weight|bias)',
         lambda m: 'scale_head.predictor.' + {
             '1': 'block1.layers.0',
             '3': 'block2.layers.0',
             '5': 'proj'
         }[m[1]] + f'.{m[2]}'),
    ]
    for pattern, build in rules:
        m = re.fullmatch(pattern, key)
        if m:
            return build(m)
    return None


def _indexed(state, pattern: str):
    """``{index: tensor}`` of the keys matching ``pattern`` (one group)."""
    found = {}
    for key, value in state.items():
        m = re.fullmatch(pattern, key)
        if m:
            found[int(m.group(1))] = value
    return [found[i] for i in sorted(found)]


def _config(state, task: Optional[str], backbone: str,
            image_size: Tuple[int, int]) -> dict:
    """The Transformers config of an official-layout state dict."""
    b = backbone
    patch = state[f'{b}patch_embed.projection.weight']
    hidden, channels, patch_size = patch.shape[0], patch.shape[1], \
        patch.shape[2]
    layers = len({
        int(m.group(1))
        for k in state
        for m in [re.match(rf'{re.escape(b)}blocks\.(\d+)\.', k)] if m
    })
    head_dim = state[f'{b}blocks.0.attn.q_norm.weight'].shape[0]
    heads = hidden // head_dim
    kv_heads = [
        state[f'{b}blocks.{i}.attn.wk.weight'].shape[0] // head_dim
        for i in range(layers)
    ]
    if any(k.startswith(f'{b}tokenizer.') for k in state):
        raise ValueError('The 4K tokenizer (sapiens2_1b_4k) has no '
                         'Transformers counterpart.')
    config = {
        'model_type': 'sapiens2',
        'architectures': [_ARCH_OF_TASK[task] if task else 'Sapiens2Model'],
        'hidden_size': hidden,
        'intermediate_size':
        state[f'{b}blocks.0.ffn.w12.weight'].shape[0] // 2,
        'num_hidden_layers': layers,
        'num_attention_heads': heads,
        'num_key_value_heads_per_layer': kv_heads,
        'num_register_tokens': state[f'{b}storage_tokens'].shape[1],
        'num_channels': channels,
        'patch_size': patch_size,
        'image_size': list(image_size),
        'use_qk_norm': True,
        'use_gated_mlp': True,
        'rope_theta': 100.0,
        'rms_norm_eps': 1e-6,
        'normalize_backbone_outputs': False,
        'pos_embed_rescale': None,
    }
    if task is None:
        return config
    predictor = state[f'decode_head.conv_{task}.weight']
    config['num_labels'] = predictor.shape[0]
    head: dict = {}
    if task in _DECONV_TASKS:
        ups = _indexed(state, r'decode_head\.deconv_layers\.(\d+)\.weight')
        head['upsample_out_channels'] = [u.shape[1] for u in ups]
        head['upsample_kernel_sizes'] = [u.shape[2] for u in ups]
    else:
        ups = _indexed(state,
                       r'decode_head\.upsample_blocks\.(\d+)\.0\.weight')
        head['use_pixel_shuffle'] = True
        head['upsample_out_channels'] = [u.shape[0] // 4 for u in ups]
        head['upsample_kernel_sizes'] = [u.shape[2] for u in ups]
    convs = _indexed(state, r'decode_head\.conv_layers\.(\d+)\.weight')
    head['conv_out_channels'] = [c.shape[0] for c in convs]
    head['conv_kernel_sizes'] = [c.shape[2] for c in convs]
    if task == 'pointmap':
        scale = _indexed(state,
                         r'decode_head\.scale_conv_layers\.(\d+)\.weight')
        linears = _indexed(
            state, r'decode_head\.scale_final_layer\.(\d+)\.weight')
        head['scale_conv_out_channels'] = [c.shape[0] for c in scale]
        head['scale_conv_kernel_sizes'] = [c.shape[2] for c in scale]
        head['scale_final_input_size'] = linears[0].shape[1]
        head['scale_final_hidden_sizes'] = [
            lin.shape[0] for lin in linears[:-1]
        ]
    config['head_config'] = head
    return config


def save_transformers_checkpoint(state: Dict[str, torch.Tensor],
                                 folder: str,
                                 image_size: Tuple[int, int] = (1024, 768)
                                 ) -> dict:
    """Write an official-layout state dict as a Transformers folder
    (``config.json`` + ``model.safetensors``) that
    ``transformers.Sapiens2For*.from_pretrained(folder)`` loads.

    Returns:
        The config written.
    """
    tensors, config = to_transformers_layout(state, image_size)
    os.makedirs(folder, exist_ok=True)
    save_safetensors(tensors, osp.join(folder, WEIGHTS_NAME))
    tmp = osp.join(folder, f'.{CONFIG_NAME}.{os.getpid()}')
    with open(tmp, 'w', encoding='utf-8') as f:
        json.dump(config, f, indent=2)
    os.replace(tmp, osp.join(folder, CONFIG_NAME))
    return config
