"""The attention kernel of the Sapiens backbones, and choosing it.

:func:`scaled_dot_product_attention` is what the Sapiens and Sapiens2
attention modules call: ``F.scaled_dot_product_attention``'s signature and
results, with faster CPU routes. For inference on a CPU with AVX512_BF16
(bf16 or float32 q / k / v, head size 64, no mask, no dropout, no autograd)
it runs a small C kernel (``csrc/attention.c``) that keeps each block
of scores in cache and computes both products with the CPU's bf16
dot-product instruction or float32 FMAs. Measured on the Sapiens shapes
(16 heads x 3072 tokens x 64, 2 threads, AMD EPYC): PyTorch's CPU flash
kernel reaches about 0.35 of the bf16 GEMM rate and 0.7 of the float32 one,
these kernels about 0.8 and 0.9 (``tools/analysis/attention_kernels.py``;
the rest is the softmax's exponentials, on the FMA units the two products
keep busy). The kernel is the custom op ``sapiens_mm::cpu_attention``
(``torch.ops.sapiens_mm.cpu_attention(q, k, v)``), so ``torch.compile``
and ``torch.export`` keep it in their graphs (outside
:func:`sapiens_mm.utils.cpu_kernels.pytorch_ops_only`). It is built with
the package (see :mod:`sapiens_mm.utils.cpu_kernels`); without it or the
instructions, everything goes to PyTorch's kernel.

PyTorch picks its own kernel per call: on a GPU cuDNN's fused attention,
FlashAttention-2 or the memory-efficient kernel, on a CPU its flash kernel
or the plain math fallback. :func:`sdpa_backend` pins the choice for the
code inside it (``'torch'``: PyTorch's choice, never the C kernel; the
others through ``torch.nn.attention.sdpa_kernel``), so that a benchmark can
time each kernel on the same model.

Example:
    >>> with sdpa_backend('cudnn', 'cuda'):
    ...     feats = backbone(images)
"""
import contextlib
import contextvars
import ctypes
import math
from typing import Iterator, Literal, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from mmengine.logging import print_log

from .cpu_kernels import cpu_kernel, kernel_available, kernel_route

__all__ = ['SDPA_BACKENDS', 'SDPABackend', 'resolve_sdpa_backend',
           'sdpa_backend', 'scaled_dot_product_attention',
           'cpu_attention', 'cpu_attention_available']

SDPABackend = Literal['auto', 'torch', 'cudnn', 'flash', 'efficient',
                      'math']
#: Backend names accepted by :func:`sdpa_backend`: ``'auto'`` (the C kernel
#: where it applies, else PyTorch's choice), ``'torch'`` (PyTorch's
#: choice), or one PyTorch kernel.
SDPA_BACKENDS: Tuple[str, ...] = ('auto', 'torch', 'cudnn', 'flash',
                                  'efficient', 'math')
# The backend in effect (set by sdpa_backend; per thread and task).
_BACKEND: contextvars.ContextVar = contextvars.ContextVar(
    'sapiens_sdpa_backend', default='auto')
# name -> member of torch.nn.attention.SDPBackend
_MEMBERS = dict(cudnn='CUDNN_ATTENTION', flash='FLASH_ATTENTION',
                efficient='EFFICIENT_ATTENTION', math='MATH')
# The kernels PyTorch implements for CPU tensors.
_CPU_BACKENDS = ('torch', 'flash', 'math')


def resolve_sdpa_backend(name: str,
                         device: Union[str, torch.device]) -> str:
    """The backend :func:`sdpa_backend` uses for ``name`` on ``device``.

    ``'cudnn'`` and ``'efficient'`` exist for CUDA tensors only: on another
    device they resolve to ``'auto'`` (PyTorch's own choice), with a
    warning in the log.

    Args:
        name: One of :data:`SDPA_BACKENDS`.
        device: The device the attention runs on.

    Returns:
        str: The backend name that takes effect.

    Raises:
        ValueError: ``name`` is not one of :data:`SDPA_BACKENDS`.
    """
    if name not in SDPA_BACKENDS:
        raise ValueError(f'Unknown SDPA backend {name!r}; choose one of '
                         f'{list(SDPA_BACKENDS)}.')
    kind = torch.device(device).type
    if name != 'auto' and kind != 'cuda' and name not in _CPU_BACKENDS:
        print_log(
            f'SDPA backend {name!r} exists for CUDA tensors only; on {kind} '
            'PyTorch chooses the attention kernel itself.',
            logger='current', level=30)
        return 'auto'
    return name


@contextlib.contextmanager
def sdpa_backend(name: SDPABackend,
                 device: Union[str, torch.device]) -> Iterator[str]:
    """Run ``F.scaled_dot_product_attention`` with one kernel only.

    Inside the context every attention call uses the chosen kernel, or
    raises PyTorch's ``RuntimeError`` ("No available kernel") for inputs
    that kernel does not support (dtype, head size, device), so a timing is
    never silently of another kernel. ``'auto'`` uses the C kernel where it
    applies and PyTorch's choice elsewhere; ``'torch'`` PyTorch's choice
    only.

    Args:
        name: ``'auto'``, ``'torch'``, ``'cudnn'`` (cuDNN fused attention),
            ``'flash'``
            (FlashAttention-2 on CUDA, PyTorch's flash kernel on CPU),
            ``'efficient'`` (memory-efficient attention) or ``'math'``
            (the unfused reference).
        device: Where the attention runs; CUDA-only backends fall back to
            ``'auto'`` elsewhere (:func:`resolve_sdpa_backend`).

    Yields:
        str: The backend in effect.
    """
    effective = resolve_sdpa_backend(name, device)
    token = _BACKEND.set(effective)
    try:
        if effective in ('auto', 'torch'):
            yield effective
        else:
            from torch.nn.attention import SDPBackend, sdpa_kernel
            with sdpa_kernel([getattr(SDPBackend, _MEMBERS[effective])]):
                yield effective
    finally:
        _BACKEND.reset(token)


def scaled_dot_product_attention(query: torch.Tensor,
                                 key: torch.Tensor,
                                 value: torch.Tensor,
                                 attn_mask: Optional[torch.Tensor] = None,
                                 dropout_p: float = 0.0,
                                 is_causal: bool = False,
                                 scale: Optional[float] = None,
                                 enable_gqa: bool = False) -> torch.Tensor:
    """``F.scaled_dot_product_attention`` (same arguments and result), run
    by :func:`cpu_attention` where that applies (see the module docstring)
    and by PyTorch otherwise.

    The bf16 kernel's output is exact attention with float32 accumulation
    and the probabilities rounded to bf16 before the second product, as in
    PyTorch's CPU flash kernel: the two differ by a few bf16 rounding steps
    (measured: max abs difference to a float32 reference 1.16e-3 vs
    PyTorch's 1.20e-3 on unit-normal 16 x 3072 x 64 inputs). The float32
    kernel differs from PyTorch's by float32 roundings (measured: 7e-7 from
    a float64 reference against PyTorch's 4e-7 on those inputs).
    """
    if (_BACKEND.get() == 'auto' and attn_mask is None and not dropout_p
            and not is_causal and (scale is None or scale == 0.125)
            and _fits_cpu_kernel(query, key, value, enable_gqa)):
        return torch.ops.sapiens_mm.cpu_attention(query, key, value)
    return F.scaled_dot_product_attention(
        query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
        is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)


def _fits_cpu_kernel(q, k, v, enable_gqa: bool) -> bool:
    """Whether a C kernel computes this call: CPU tensors of one dtype
    that has a kernel on this machine, on the kernels' route
    (:func:`~sapiens_mm.utils.cpu_kernels.kernel_route`: no autograd, no
    TorchScript / ONNX tracing), (B, heads, N, 64) with a contiguous last
    dim, self-attention sizes."""
    if not (q.dtype in _KERNELS and q.dtype == k.dtype == v.dtype
            and kernel_route(q, k, v)
            and kernel_available(_KERNELS[q.dtype])
            and all(t.dim() == 4 and t.shape[-1] == 64 and t.stride(-1) == 1
                    for t in (q, k, v))):
        return False
    heads, kv_heads = q.shape[1], k.shape[1]
    return (k.shape == v.shape and q.shape[0] == k.shape[0]
            and q.shape[2] == k.shape[2] and q.shape[2] > 0
            and kv_heads > 0 and heads % kv_heads == 0
            and (kv_heads == heads or enable_gqa))


def cpu_attention(q: torch.Tensor, k: torch.Tensor,
                  v: torch.Tensor) -> Optional[torch.Tensor]:
    """Unmasked attention ``softmax(q k^T / 8) v`` by the C kernel of q's
    dtype (bf16 or float32).

    Args:
        q: (B, heads, N, 64) bf16 or float32 CPU tensor, last dim contiguous
            (any other strides, e.g. views of one qkv projection).
        k: (B, kv_heads, N, 64), ``kv_heads`` dividing ``heads`` (query
            head h reads K/V head ``h // (heads // kv_heads)``).
        v: Like ``k``.

    Returns:
        (B, heads, N, 64) in q's dtype, a view of a (B, N, heads, 64) tensor
        (the layout the attention modules reshape to next, without a copy);
        None when the kernel is not available on this machine (see
        :func:`cpu_attention_available`) or could not allocate.
    """
    fn = cpu_kernel(_KERNELS[q.dtype]) if q.dtype in _KERNELS else None
    if fn is None:
        return None
    b, heads, n, d = q.shape
    out = _attention_output(q)

    def strides(t):
        return (ctypes.c_int64 * 3)(*t.stride()[:3])

    rc = fn(q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr(), b,
            heads, k.shape[1], n, strides(q), strides(k), strides(v),
            strides(out), 1.0 / math.sqrt(d), torch.get_num_threads())
    return out if rc == 0 else None


@torch.library.custom_op('sapiens_mm::cpu_attention', mutates_args=(),
                         device_types='cpu')
def _cpu_attention_op(q: torch.Tensor, k: torch.Tensor,
                      v: torch.Tensor) -> torch.Tensor:
    """``sapiens_mm::cpu_attention``: :func:`cpu_attention` as a PyTorch
    op, in the kernel's output layout. Where the kernel cannot run (a graph
    recorded on another machine, memory exhausted) PyTorch's SDPA computes
    it."""
    out = cpu_attention(q, k, v)
    if out is None:
        out = _attention_output(q)
        out.copy_(F.scaled_dot_product_attention(
            q, k, v, enable_gqa=k.shape[1] != q.shape[1]))
    return out


@_cpu_attention_op.register_fake
def _cpu_attention_fake(q: torch.Tensor, k: torch.Tensor,
                        v: torch.Tensor) -> torch.Tensor:
    return _attention_output(q)


def _attention_output(q: torch.Tensor) -> torch.Tensor:
    """An empty (B, heads, N, 64) output like q's: a view of a (B, N,
    heads, 64) tensor, the kernel's layout."""
    b, heads, n, d = q.shape
    return q.new_empty(b, n, heads, d).transpose(1, 2)


def cpu_attention_available(dtype: torch.dtype = torch.bfloat16) -> bool:
    """Whether this machine runs :func:`cpu_attention` for ``dtype``: a CPU
    with AVX512_BF16 and the kernels built with the package."""
    return dtype in _KERNELS and kernel_available(_KERNELS[dtype])


# dtype -> the C kernel for it
_KERNELS = {
    torch.bfloat16: 'sapiens_attention_bf16',
    torch.float32: 'sapiens_attention_f32',
}
