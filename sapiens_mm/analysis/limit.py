"""The limit of a forward pass: the time its FLOPs take at the rates this
machine reaches on the model's own GEMM shapes.

- Every matmul-like call of :class:`~sapiens_mm.analysis.flops.Work` is
  timed on its ``(M, K) x (K, N)`` shape in its dtype through the linear
  layer the Sapiens models run for inference
  (:class:`~sapiens_mm.utils.cpu_linear.PackedCpuLinear`: oneDNN on a
  packed weight for bf16 on a CPU, ``F.linear`` elsewhere), so that the
  limit counts the fastest GEMM route the model has.
- Attention (QK^T and AV) is counted at the **GEMM rate** of the same pass:
  the FLOP-weighted rate of its matmul calls (:func:`gemm_rate`). Attention
  is two GEMMs and a softmax, so a kernel that keeps the score tile in cache
  runs near that rate; timing the attention kernel itself would make a slow
  kernel its own limit. The attention kernel's own rate is measured too and
  reported beside it (:func:`kernel_limit_seconds` is the limit with each
  call at its own kernel's rate).

``limit = sum_matmul flops_i / rate_i + attention_flops / gemm_rate``;
``achieved/limit = limit / latency`` (above 1 means the timings disagree:
:func:`limit_warnings`).
"""
import math
from typing import Callable, Dict, List, Optional

import torch
import torch.nn as nn

from sapiens_mm.utils.cpu_linear import pack_cpu_linears
from .flops import Work, WorkItem
from .timing import time_callable

__all__ = ['KNOWN_GPU_PEAK_TFLOPS', 'kernel_calls', 'measure_rates',
           'limit_seconds', 'gemm_rate', 'gemm_limit_seconds',
           'kernel_limit_seconds', 'limit_warnings', 'gpu_peak_tflops']

#: Dense (no sparsity) bf16 / fp16 tensor-core peaks from the vendors' data
#: sheets, in TFLOP/s, matched against ``torch.cuda.get_device_name()``.
#: Pass ``peak_tflops`` for any other GPU.
KNOWN_GPU_PEAK_TFLOPS = (
    ('H200', 989.0),  # SXM
    ('H100 PCIe', 756.0),
    ('H100', 989.0),  # SXM
    ('A100', 312.0),
    ('L40S', 362.0),
    ('A10G', 70.0),
    ('V100', 125.0),  # fp16 only; V100 has no bf16 tensor cores
)


def kernel_calls(work: Work,
                 device: torch.device) -> Dict[WorkItem, Callable[[], object]]:
    """One callable per distinct call of ``work`` that runs the kernel on
    random inputs of the recorded shape and dtype.

    Matmuls run a :class:`~sapiens_mm.utils.cpu_linear.PackedCpuLinear`
    (``F.linear(x (M, K), w (N, K), bias (N))`` or its packed CPU bf16
    route, see the module docstring); attention runs
    the recorded attention function on q, k, v rebuilt with the recorded
    sizes, strides and storage sharing, and the call's other arguments.
    """
    calls = {}
    gen = torch.Generator(device=device).manual_seed(0)
    for item in work.items:
        if item.kind == 'matmul':
            m, k, n = item.shape
            x = torch.randn(m, k, generator=gen, device=device,
                            dtype=item.dtype)
            layer = nn.Linear(k, n, device=device, dtype=item.dtype)
            with torch.no_grad():
                layer.weight.copy_(
                    torch.randn(n, k, generator=gen, device=device,
                                dtype=item.dtype) / math.sqrt(k))
                layer.bias.copy_(
                    torch.randn(n, generator=gen, device=device,
                                dtype=item.dtype))
            pack_cpu_linears(layer)

            def fn(x=x, layer=layer):
                with torch.inference_mode():
                    return layer(x)
        else:
            # q, k, v share one storage when the model's did (views of one
            # qkv projection output).
            bases: Dict[int, torch.Tensor] = {}
            tensors = []
            for size, stride, offset, numel, group in item.shape:
                if group not in bases:
                    bases[group] = torch.randn(
                        numel, generator=gen, device=device,
                        dtype=item.dtype)
                tensors.append(bases[group].as_strided(size, stride, offset))
            attn = work.attention_fns[item]
            args, kwargs = work.attention_args.get(item, ((), {}))

            def fn(t=tuple(tensors), attn=attn, args=args, kwargs=kwargs):
                with torch.inference_mode():
                    return attn(*t, *args, **kwargs)
        calls[item] = fn
    return calls


def measure_rates(work: Work, device: torch.device, repeats: int = 3,
                  min_time: float = 0.2) -> Dict[WorkItem, float]:
    """FLOP/s this machine reaches on each distinct call of ``work``
    (:func:`kernel_calls`): FLOPs / median time of at least ``repeats``
    calls and ``min_time`` seconds, after one warm-up call."""
    return {
        item: item.flops / time_callable(fn, device, warmup=1,
                                         repeats=repeats,
                                         min_time=min_time).median
        for item, fn in kernel_calls(work, device).items()
    }


def limit_seconds(work: Work, rates: Dict[WorkItem, float],
                  kind: Optional[str] = None) -> float:
    """``sum_i calls_i * flops_i / rate_i`` (of one ``kind``, or all)."""
    return sum(n * it.flops / rates[it] for it, n in work.items.items()
               if kind is None or it.kind == kind)


def gpu_peak_tflops(device: torch.device) -> Optional[float]:
    """Dense bf16 peak of a known GPU (:data:`KNOWN_GPU_PEAK_TFLOPS`), or
    None."""
    if device.type != 'cuda':
        return None
    name = torch.cuda.get_device_name(device)
    for key, tflops in KNOWN_GPU_PEAK_TFLOPS:
        if key.lower() in name.lower():
            return tflops
    return None


def gemm_rate(work: Work, rates: Dict[WorkItem, float]) -> float:
    """The GEMM rate of a pass: its matmul FLOPs over the time they take at
    each call's measured rate (FLOP-weighted harmonic mean, FLOP/s).

    Raises:
        ValueError: ``work`` has no matmul call.
    """
    flops = work.flops('matmul')
    if not flops:
        raise ValueError('The forward pass made no matmul-like call: no GEMM '
                         'rate to count its work at.')
    return flops / limit_seconds(work, rates, 'matmul')


def gemm_limit_seconds(work: Work, rates: Dict[WorkItem, float]) -> float:
    """The limit: matmul calls at their own rates, attention FLOPs at
    :func:`gemm_rate`."""
    return (limit_seconds(work, rates, 'matmul') +
            work.flops('attention') / gemm_rate(work, rates))


def kernel_limit_seconds(work: Work, rates: Dict[WorkItem, float]) -> float:
    """Each call at its own kernel's rate (attention at the attention
    kernel's): what the model would take with no overhead and the
    attention kernel it has."""
    return limit_seconds(work, rates)


def limit_warnings(achieved_over_limit: float,
                   spreads: Dict[str, float],
                   threshold: float = 1.2) -> List[str]:
    """Sentences on figures that cannot be trusted as measured.

    Args:
        achieved_over_limit: ``limit / latency``; above 1 the model ran
            faster than its own kernels did, so some timing was disturbed.
        spreads: ``name -> max / min`` of the repeats of each timing.
        threshold: Spread above which the repeats are said to disagree
            (1.2: the slowest more than 20 % slower than the fastest).
    """
    out = []
    if achieved_over_limit > 1:
        out.append(f'achieved/limit {achieved_over_limit:.3f} > 1: the '
                   'model ran faster than the limit its own kernel timings '
                   'give, so load on the machine disturbed the kernel '
                   'timings; rerun on a quiet machine')
    for name, spread in spreads.items():
        if spread > threshold:
            out.append(f'{name}: repeats spread {100 * (spread - 1):.0f} % '
                       '(max / min): other load on the machine; the '
                       'min-based figures are the less disturbed ones')
    return out
