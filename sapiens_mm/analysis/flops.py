"""What a forward pass computes: its matmul-like and attention calls.

:func:`count_work` records each ``nn.Linear``, ``nn.Conv2d`` and
``nn.ConvTranspose2d`` call as its equivalent GEMM (``tokens x in -> out``;
for a convolution ``B*Ho*Wo x Cin*kh*kw -> Cout``) and each call of a
module's ``scaled_dot_product_attention`` attribute (the attention function
of mmpretrain's ``MultiheadAttention`` and of the Sapiens2 attention) with
the sizes, strides and storage sharing of q, k and v, so that
:mod:`sapiens_mm.analysis.limit` can time the same calls. Given a device,
it also times every recorded call, and every normalisation layer, where
the model makes it (:attr:`Work.seconds`): what the pass spends in its
GEMMs, its attention and its norms, the rest being everything else.
"""
import math
import re
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, Optional

import torch
import torch.nn as nn

from .timing import sync

__all__ = ['WorkItem', 'Work', 'count_work']


@dataclass(frozen=True)
class WorkItem:
    """One kind of kernel call of a forward pass.

    Attributes:
        kind: ``'matmul'`` or ``'attention'``.
        shape: ``(M, K, N)`` of the equivalent GEMM for matmul; for
            attention ``(size, stride, storage_offset, storage_numel)`` of
            q, k and v (they may share one storage).
        dtype: The compute dtype.
        flops: FLOPs of one call (multiply-add = 2).
    """
    kind: str
    shape: tuple
    dtype: torch.dtype
    flops: int


@dataclass
class Work:
    """The matmul-like and attention work of one forward pass.

    Attributes:
        items: ``WorkItem -> number of calls``.
        attention_fns: ``WorkItem -> the attention function the model
            called`` (timed by :func:`measure_rates`).
        attention_args: ``WorkItem -> (args, kwargs)`` the call passed
            after q, k, v (e.g. ``enable_gqa``); the timing passes them too.
        seconds: When the pass was timed: wall seconds inside the calls of
            each kind, ``'matmul'``, ``'attention'`` and ``'norm'`` (modules
            whose class name ends in ``Norm`` or ``Norm1d`` / ``2d`` /
            ``3d``: ``LayerNorm``, ``RMSNorm``, ``BatchNorm2d``...); empty
            otherwise.
    """
    items: Dict[WorkItem, int] = field(default_factory=dict)
    attention_fns: Dict[WorkItem, Callable] = field(default_factory=dict)
    attention_args: Dict[WorkItem, tuple] = field(default_factory=dict)
    seconds: Dict[str, float] = field(default_factory=dict)

    def flops(self, kind: Optional[str] = None) -> int:
        """Total FLOPs (of one ``kind``, or all)."""
        return sum(it.flops * n for it, n in self.items.items()
                   if kind is None or it.kind == kind)


# Class names of normalisation layers (LayerNorm, RMSNorm, BatchNorm2d...).
_NORM = re.compile(r'Norm([123]d)?$')


def _compute_dtype(t: torch.Tensor, weight: torch.Tensor) -> torch.dtype:
    dev = t.device.type
    if torch.is_autocast_enabled(dev) and t.is_floating_point():
        return torch.get_autocast_dtype(dev)
    return weight.dtype


def _storage_spec(t: torch.Tensor) -> tuple:
    return (tuple(t.shape), tuple(t.stride()), t.storage_offset(),
            t.untyped_storage().nbytes() // t.element_size())


def count_work(model: nn.Module,
               run: Callable[[], object],
               device: Optional[torch.device] = None) -> Work:
    """Record the matmul-like and attention calls of one forward pass.

    ``nn.Linear``, ``nn.Conv2d`` and ``nn.ConvTranspose2d`` calls are
    recorded by forward hooks; attention calls by wrapping, for the duration
    of ``run``, the ``scaled_dot_product_attention`` attribute of every
    module that has one (mmpretrain's ``MultiheadAttention``).

    Args:
        model: The model ``run`` calls.
        run: Runs one forward pass (with the dtype / autocast to measure).
        device: Also time each call, and each normalisation layer, on this
            device (waiting for its queue before and after each: on a GPU
            the pass then runs slower than it does unobserved), into
            :attr:`Work.seconds`. None: count only.

    Returns:
        Work: The calls, grouped by shape and dtype.
    """
    work = Work()
    starts: Dict[int, list] = {}

    def add(item: WorkItem, n: int = 1):
        work.items[item] = work.items.get(item, 0) + n

    def charge(kind: str, start: float):
        """Add the time since ``start`` (device queue drained) to kind."""
        sync(device)
        work.seconds[kind] = (work.seconds.get(kind, 0.0) +
                              time.perf_counter() - start)

    def start_hook(mod, args):
        sync(device)
        starts.setdefault(id(mod), []).append(time.perf_counter())

    def stop(mod, kind: str):
        charge(kind, starts[id(mod)].pop())

    def linear_hook(mod, args, out):
        if device is not None:
            stop(mod, 'matmul')
        x = args[0]
        k = mod.in_features
        m = x.numel() // k
        n = mod.out_features
        # a layer in its inference form computes in its packed dtype
        dtype = getattr(mod, 'packed_dtype', None) or _compute_dtype(
            x, mod.weight)
        add(WorkItem('matmul', (m, k, n), dtype, 2 * m * k * n))

    def conv_hook(mod, args, out):
        if device is not None:
            stop(mod, 'matmul')
        x = args[0]
        g = mod.groups
        kk = math.prod(mod.kernel_size)
        batch = x.shape[0] if x.dim() == 4 else 1
        if isinstance(mod, nn.ConvTranspose2d):
            m = batch * x.shape[-2] * x.shape[-1]
            k = mod.in_channels // g
            n = mod.out_channels // g * kk
        else:
            m = batch * out.shape[-2] * out.shape[-1]
            k = mod.in_channels // g * kk
            n = mod.out_channels // g
        add(WorkItem('matmul', (m, k, n), _compute_dtype(x, mod.weight),
                     2 * m * k * n), g)

    def wrap(fn):
        def recorded(q, k, v, *args, **kwargs):
            b_h = math.prod(q.shape[:-2])
            flops = 2 * b_h * q.shape[-2] * k.shape[-2] * (
                q.shape[-1] + v.shape[-1])
            ptrs = [t.untyped_storage().data_ptr() for t in (q, k, v)]
            item = WorkItem(
                'attention',
                tuple(_storage_spec(t) + (ptrs.index(p), )
                      for t, p in zip((q, k, v), ptrs)), q.dtype, flops)
            add(item)
            work.attention_fns.setdefault(item, fn)
            work.attention_args.setdefault(item, (args, kwargs))
            if device is None:
                return fn(q, k, v, *args, **kwargs)
            sync(device)
            start = time.perf_counter()
            out = fn(q, k, v, *args, **kwargs)
            charge('attention', start)
            return out
        return recorded

    def norm_hook(mod, args, out):
        stop(mod, 'norm')

    handles, wrapped = [], []
    for mod in model.modules():
        hook = None
        if isinstance(mod, nn.Linear):
            hook = linear_hook
        elif isinstance(mod, (nn.Conv2d, nn.ConvTranspose2d)):
            hook = conv_hook
        elif device is not None and _NORM.search(type(mod).__name__):
            hook = norm_hook
        if hook is not None:
            handles.append(mod.register_forward_hook(hook))
            if device is not None:
                handles.append(mod.register_forward_pre_hook(start_hook))
        fn = mod.__dict__.get('scaled_dot_product_attention')
        if callable(fn):
            mod.scaled_dot_product_attention = wrap(fn)
            wrapped.append((mod, fn))
    try:
        run()
    finally:
        for h in handles:
            h.remove()
        for mod, fn in wrapped:
            mod.scaled_dot_product_attention = fn
    return work
