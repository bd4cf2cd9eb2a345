"""What the CPU this process runs on can do, as PyTorch sees it.

Every answer comes from PyTorch's own capability checks, the ones its
kernels dispatch on: ``torch.cpu.get_capabilities()`` (cpuinfo's CPUID
reading on x86, the kernel's hardware capabilities on ARM) and oneDNN's
data-type checks (``torch.ops.mkldnn._is_mkldnn_bf16_supported()``, the
test Inductor applies before it packs a linear layer). They hold on every
OS and architecture PyTorch runs on, and they agree with what PyTorch's
kernels will do: a CPU that PyTorch runs without AVX-512 (an emulator, a
hypervisor masking features) is one without AVX-512 here too.

What each answer decides:

- :func:`packed_linear_supported`: whether oneDNN's packed linear layer
  (:mod:`sapiens_mm.utils.cpu_linear`) can run a dtype here at all;
- :func:`cpu_has_native_bf16`: whether bf16 is faster than float32 here
  (``dtype='auto'``);
- :func:`cpu_kernels_supported`: whether the C kernels of
  :mod:`sapiens_mm.utils.cpu_kernels` (AVX-512 with AVX512_BF16) can run;
- :func:`log_cpu_dtype_advice`: the one line a user gets when the dtype
  they asked for has no native support here.
"""
import functools
import logging
from typing import Any, Mapping

import torch
from mmengine.logging import print_log

__all__ = ['cpu_capabilities', 'cpu_architecture', 'cpu_has_native_bf16',
           'packed_linear_supported', 'cpu_kernels_supported',
           'log_cpu_dtype_advice', 'CPU_KERNEL_FEATURES']

#: The x86 features the C kernels are compiled for (names of
#: ``torch.cpu.get_capabilities()``): AVX-512 F/BW/DQ/VL, the bf16 dot
#: product and conversions of AVX512_BF16, FMA.
CPU_KERNEL_FEATURES = ('avx512_f', 'avx512_bw', 'avx512_dq', 'avx512_vl',
                       'avx512_bf16', 'fma3')


def cpu_capabilities() -> Mapping[str, Any]:
    """PyTorch's view of this CPU: ``torch.cpu.get_capabilities()`` (a
    mapping of feature names to booleans plus ``'architecture'``), or an
    empty mapping where this PyTorch cannot tell."""
    get = getattr(torch.cpu, 'get_capabilities', None)
    if get is None:
        return {}
    try:
        return get()
    except RuntimeError:  # cpuinfo could not initialise
        return {}


def cpu_architecture() -> str:
    """``'x86_64'``, ``'aarch64'``... as PyTorch reports it ('' where it
    cannot tell)."""
    return str(cpu_capabilities().get('architecture', ''))


def _mkldnn_op(name: str):
    """An op of ``torch.ops.mkldnn``, or None where this build lacks it."""
    if not torch.backends.mkldnn.is_available():
        return None
    try:
        return getattr(torch.ops.mkldnn, name)
    except (AttributeError, RuntimeError):
        return None


@functools.lru_cache(maxsize=None)
def packed_linear_supported(dtype: torch.dtype) -> bool:
    """Whether oneDNN's packed linear layer (``mkldnn._reorder_linear_weight``
    and ``mkldnn._linear_pointwise``) can run ``dtype`` on this CPU.

    - bf16 / float16: where oneDNN supports the type on this CPU (PyTorch's
      ``_is_mkldnn_bf16_supported()`` / ``_is_mkldnn_fp16_supported()``:
      on x86 AVX-512 (BW, VL, DQ) or AVX-NE-CONVERT for bf16, on ARM the
      BF16 extension); elsewhere the packing raises, and the plain
      ``nn.Linear`` runs (emulated, slower).
    - float32: on x86, and on ARM where oneDNN has its Arm Compute Library
      backend (the check Inductor makes before it packs a float32 layer).

    Args:
        dtype: The compute dtype of the layer.

    Returns:
        bool: False also where this PyTorch has no oneDNN packed ops
        (answered once per dtype).
    """
    reorder, pointwise = (_mkldnn_op('_reorder_linear_weight'),
                          _mkldnn_op('_linear_pointwise'))
    if reorder is None or pointwise is None:
        return False
    if dtype == torch.bfloat16:
        check = _mkldnn_op('_is_mkldnn_bf16_supported')
    elif dtype == torch.float16:
        check = _mkldnn_op('_is_mkldnn_fp16_supported')
    elif dtype == torch.float32:
        if cpu_architecture() == 'x86_64':
            return True
        check = _mkldnn_op('_is_mkldnn_acl_supported')
    else:
        return False
    return check is not None and bool(check())


def cpu_has_native_bf16() -> bool:
    """Whether the CPU computes bf16 products natively, which makes bf16
    inference faster than float32 on it: x86 with AVX512_BF16 or AMX-BF16,
    ARM with the BF16 extension (Graviton 3 and later, Apple M2 and later)
    where oneDNN runs bf16. Elsewhere PyTorch emulates bf16 matmuls and
    bf16 is slower (measured 4x on an AVX2 CPU)."""
    caps = cpu_capabilities()
    arch = caps.get('architecture')
    if arch == 'x86_64':
        return bool(caps.get('avx512_bf16') or caps.get('amx_bf16'))
    if arch == 'aarch64':
        return bool(caps.get('bf16')) and packed_linear_supported(
            torch.bfloat16)
    return False


def cpu_kernels_supported() -> bool:
    """Whether this CPU has every instruction the C kernels use
    (:data:`CPU_KERNEL_FEATURES`, x86-64 only)."""
    caps = cpu_capabilities()
    return caps.get('architecture') == 'x86_64' and all(
        caps.get(name) for name in CPU_KERNEL_FEATURES)


# whether log_cpu_dtype_advice has spoken in this process
_advised = False


def log_cpu_dtype_advice(dtype: torch.dtype) -> None:
    """Say once per process (a warning in the log) when CPU inference in
    ``dtype`` will be slow here: bf16 without native support (an AVX2 CPU,
    or AVX-512 without AVX512_BF16) runs on PyTorch's emulated bf16 kernels
    (and, where oneDNN cannot run bf16, the plain linear layers), slower
    than float32; ``dtype='auto'`` picks float32 there. Silent where the
    dtype is native, and for float32."""
    global _advised
    if dtype != torch.bfloat16 or _advised or cpu_has_native_bf16():
        return
    _advised = True
    capability = torch.backends.cpu.get_cpu_capability()
    linear = ('' if packed_linear_supported(dtype) else
              "; oneDNN cannot run bf16 here, so linear layers take "
              "PyTorch's plain path")
    print_log(
        f'bf16 on this CPU (PyTorch capability {capability}, no native '
        "bf16) runs on PyTorch's emulated bf16 kernels, slower than float32 "
        f"(about 4x measured on an AVX2 CPU){linear}; dtype='auto' picks "
        'float32 here.', logger='current', level=logging.WARNING)
