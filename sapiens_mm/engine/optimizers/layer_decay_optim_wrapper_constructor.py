"""Layer-wise learning-rate decay for Sapiens fine-tuning (official rules)."""
from typing import List, Optional

import torch.nn as nn
from mmengine.logging import print_log
from mmengine.optim import DefaultOptimWrapperConstructor
from mmengine.registry import OPTIM_WRAPPER_CONSTRUCTORS

_STRIP = ('_fsdp_wrapped_module.', 'module.')
_ZERO_ID = ('backbone.cls_token', 'backbone.mask_token', 'backbone.pos_embed',
            'backbone.storage_tokens')
_ZERO_PREFIX = ('backbone.patch_embed.', 'backbone.tokenizer.')
# v1 SapiensVisionTransformer / Sapiens2VisionTransformer encoder layers
_LAYER_PREFIX = ('backbone.layers.', 'backbone.blocks.')


def get_layer_id(name: str, num_layers: int) -> int:
    """Layer id of a parameter name for ``num_layers`` encoder layers.

    ``cls_token`` / ``mask_token`` / ``pos_embed`` / ``patch_embed`` (and
    Sapiens2's ``storage_tokens`` / ``tokenizer``) -> 0,
    ``backbone.layers.i`` (Sapiens2: ``backbone.blocks.i``) -> i + 1,
    anything else (final norm, heads) -> ``num_layers + 1``.
    """
    for s in _STRIP:
        name = name.replace(s, '')
    if name in _ZERO_ID or name.startswith(_ZERO_PREFIX):
        return 0
    if name.startswith(_LAYER_PREFIX):
        return int(name.split('.')[2]) + 1
    return num_layers + 1


def is_no_decay(name: str, param: nn.Parameter) -> bool:
    """1-D parameters, biases and ``pos_embed`` get no weight decay."""
    return param.ndim == 1 or name.endswith('.bias') or 'pos_embed' in name


@OPTIM_WRAPPER_CONSTRUCTORS.register_module()
class SapiensLayerDecayOptimWrapperConstructor(DefaultOptimWrapperConstructor):
    """Optimizer constructor with Sapiens layer-wise learning-rate decay.

    Each parameter gets ``lr = base_lr * rate ** (num_layers + 1 - layer_id)``
    (see :func:`get_layer_id`), so heads train at ``base_lr`` and
    ``patch_embed`` at ``base_lr * rate ** (num_layers + 1)``; weight decay is
    0 for 1-D parameters, biases and ``pos_embed``.

    ``paramwise_cfg`` keys:
        - ``layer_decay_rate`` (float): the decay rate ``r``.
        - ``num_layers`` (int, optional): encoder depth ``L``; read from
          ``model.backbone.num_layers`` when omitted.

    Example:
        >>> optim_wrapper = dict(
        ...     optimizer=dict(type='AdamW', lr=5e-4, betas=(0.9, 0.999),
        ...                    weight_decay=0.1),
        ...     constructor='SapiensLayerDecayOptimWrapperConstructor',
        ...     paramwise_cfg=dict(num_layers=24, layer_decay_rate=0.85),
        ...     clip_grad=dict(max_norm=1.0, norm_type=2))
    """

    def __init__(self, optim_wrapper_cfg: dict,
                 paramwise_cfg: Optional[dict] = None) -> None:
        paramwise_cfg = dict(paramwise_cfg or {})
        if 'layer_decay_rate' not in paramwise_cfg:
            raise ValueError(
                'SapiensLayerDecayOptimWrapperConstructor needs '
                'paramwise_cfg=dict(layer_decay_rate=..., num_layers=...).')
        unknown = set(paramwise_cfg) - {'layer_decay_rate', 'num_layers'}
        if unknown:
            raise ValueError(
                f'Unsupported paramwise_cfg keys {sorted(unknown)} for '
                'SapiensLayerDecayOptimWrapperConstructor (it supports '
                'layer_decay_rate and num_layers only).')
        self.layer_decay_rate = float(paramwise_cfg['layer_decay_rate'])
        self.num_layers = paramwise_cfg.get('num_layers')
        super().__init__(optim_wrapper_cfg, paramwise_cfg=None)
        self.paramwise_cfg = paramwise_cfg

    def add_params(self, params: List[dict], module: nn.Module,
                   **kwargs) -> None:
        num_layers = self.num_layers
        if num_layers is None:
            backbone = getattr(module, 'backbone', None)
            num_layers = getattr(backbone, 'num_layers', None)
            if num_layers is None:
                raise ValueError('Set paramwise_cfg.num_layers: the model has '
                                 'no backbone.num_layers to read it from.')
        weight_decay = self.base_wd or 0.0
        groups = {}
        for name, param in module.named_parameters():
            if not param.requires_grad:
                continue
            layer_id = get_layer_id(name, num_layers)
            no_decay = is_no_decay(name, param)
            key = (layer_id, no_decay)
            if key not in groups:
                scale = self.layer_decay_rate**(num_layers + 1 - layer_id)
                groups[key] = dict(
                    params=[],
                    param_names=[],
                    lr=self.base_lr * scale,
                    lr_scale=scale,
                    weight_decay=0.0 if no_decay else weight_decay)
            groups[key]['params'].append(param)
            groups[key]['param_names'].append(name)
        for key in sorted(groups):
            params.append(groups[key])
        print_log(
            f'Layer decay: {len(groups)} parameter groups, rate '
            f'{self.layer_decay_rate}, {num_layers} layers.', logger='current')

    def __call__(self, model: nn.Module):
        if self.paramwise_cfg is None:  # pragma: no cover - set in __init__
            raise RuntimeError('paramwise_cfg missing')
        # The default __call__ only calls add_params when paramwise_cfg is
        # truthy, which it is here.
        return super().__call__(model)
