"""Turn an MAE pretraining checkpoint into a backbone-only "clean" file.

The official Sapiens releases ship two files per size: the full MAE
checkpoint (``sapiens_1b_epoch_173.pth``: encoder under ``backbone.``,
decoder under ``neck.``) and the ``*_clean.pth`` that every fine-tuning
config loads: the encoder's flat state dict (``patch_embed.*``,
``cls_token``, ``pos_embed`` (1, 1 + 64*64, C), ``layers.i.*``, ``ln1.*``)
with the prefix removed and the decoder, optimizer and meta dropped. The
functions here produce the latter from the former (or from a checkpoint of
our own ``configs/pretrain`` runs, which has the same layout). Reading goes
through :func:`sapiens_mm.checkpoint.loading.load_file` (safe unpickling).
"""
import os
import os.path as osp
from collections import OrderedDict
from typing import Any, Dict, Optional

import torch
from mmengine.logging import print_log

from .loading import get_state_dict, load_file

__all__ = ['extract_backbone_state_dict', 'convert_pretrain_to_clean']

#: Keys every Sapiens encoder state dict has.
_REQUIRED = ('patch_embed.projection.weight', 'pos_embed', 'ln1.weight')


def extract_backbone_state_dict(
        checkpoint: Any,
        prefix: str = 'backbone.',
        keep_cls_token: bool = True) -> 'OrderedDict[str, torch.Tensor]':
    """Return the encoder weights of a pretraining checkpoint, prefix removed.

    Args:
        checkpoint: A loaded checkpoint: Runner / official full file (with
            ``state_dict``) or a bare state dict.
        prefix: Prefix of the encoder keys. Defaults to ``'backbone.'``.
        keep_cls_token: Keep ``cls_token`` (the official clean files do;
            fine-tuning drops it at load time). Defaults to True.

    Returns:
        Flat state dict (``patch_embed.projection.weight``, ``pos_embed``,
        ``layers.0.attn.qkv.weight``, ..., ``ln1.bias``).

    Raises:
        ValueError: No key starts with ``prefix`` (the message says whether
            the input already is a clean file), or the result is not a
            Sapiens encoder.
    """
    state = get_state_dict(checkpoint)
    clean = OrderedDict((k[len(prefix):], v) for k, v in state.items()
                        if k.startswith(prefix))
    if not clean:
        if all(k in state for k in _REQUIRED):
            raise ValueError(
                'This checkpoint already is a backbone-only (clean) state '
                'dict: no key starts with '
                f'{prefix!r}. Use it as is in Pretrained init_cfg.')
        raise ValueError(
            f'No key starts with {prefix!r} (first keys: {list(state)[:5]}). '
            'Pass the prefix of the encoder weights with --prefix.')
    missing = [k for k in _REQUIRED if k not in clean]
    if missing:
        raise ValueError(
            f'The {prefix!r} weights are not a Sapiens / ViT encoder: '
            f'missing {missing}.')
    if not keep_cls_token:
        clean.pop('cls_token', None)
    return clean


def convert_pretrain_to_clean(src: str,
                              dst: str,
                              prefix: str = 'backbone.',
                              keep_cls_token: bool = True,
                              dtype: Optional[torch.dtype] = None
                              ) -> Dict[str, torch.Tensor]:
    """Write the backbone-only "clean" file of pretraining checkpoint ``src``.

    Args:
        src: MAE checkpoint (official full file or one written by
            ``tools/train.py`` with a ``configs/pretrain`` config).
        dst: Output path (``*_clean.pth`` by convention). Its folder is
            created.
        prefix: Prefix of the encoder keys in ``src``.
        keep_cls_token: Keep ``cls_token`` in the output.
        dtype: Cast floating tensors (e.g. ``torch.float16`` to halve the
            file); ``None`` keeps them.

    Returns:
        The state dict written.
    """
    if osp.abspath(src) == osp.abspath(dst):
        raise ValueError(f'Refusing to overwrite the source checkpoint {src};'
                         ' choose another output path.')
    clean = extract_backbone_state_dict(load_file(src), prefix,
                                        keep_cls_token)
    if dtype is not None:
        clean = OrderedDict(
            (k, v.to(dtype) if v.is_floating_point() else v)
            for k, v in clean.items())
    clean = OrderedDict((k, v.contiguous()) for k, v in clean.items())
    os.makedirs(osp.dirname(osp.abspath(dst)), exist_ok=True)
    torch.save(clean, dst)
    n = sum(v.numel() for v in clean.values())
    print_log(
        f'Wrote {len(clean)} backbone tensors ({n / 1e6:.1f} M values, '
        f'pos_embed {tuple(clean["pos_embed"].shape)}) to {dst}',
        logger='current')
    return clean
