"""Gradient-norm clipping over all shards of an FSDP model."""
from contextlib import contextmanager
from typing import Optional

import torch
import torch.nn as nn
from torch.distributed.fsdp import FullyShardedDataParallel

__all__ = ['FSDPClipGradMixin']


class FSDPClipGradMixin:
    """Make an mmengine optim wrapper clip by the norm of the whole gradient
    under FSDP.

    mmengine's ``OptimWrapper._clip_grad`` calls
    ``torch.nn.utils.clip_grad_norm_`` on the optimizer's parameters. Under
    FSDP each rank holds only its shard of every gradient, so that norm is
    the local shard's, and every rank clips by a different, too small norm.
    This mixin remembers the FSDP root module passed to ``optim_context``
    (mmengine's FSDP wrapper passes itself every step) and clips with
    ``FullyShardedDataParallel.clip_grad_norm_``, which all-reduces the norm
    over the shards. Without FSDP, or with ``clip_grad=dict(type='value')``,
    the parent behaviour is kept.
    """

    _fsdp_root: Optional[FullyShardedDataParallel] = None

    @contextmanager
    def optim_context(self, model: nn.Module):
        if isinstance(model, FullyShardedDataParallel):
            self._fsdp_root = model
        with super().optim_context(model):
            yield

    def _clip_grad(self) -> None:
        root = self._fsdp_root
        if root is None or self.clip_func is not torch.nn.utils.clip_grad_norm_:
            return super()._clip_grad()
        grad_norm = root.clip_grad_norm_(**self.clip_grad_kwargs)
        self.message_hub.update_scalar(f'train/{self.grad_name}',
                                       float(grad_norm))
