"""The C kernels of ``csrc/`` for x86 CPUs with AVX512_BF16: built once,
called through ctypes.

The sources (``csrc/*.c`` and their headers) are plain C with pthreads and
no PyTorch headers. On first use they are compiled with the system C
compiler (``$CC``, ``cc`` or ``gcc``; about a second) into one shared
library under ``$SAPIENS_MM_CACHE`` (default ``~/.cache/sapiens_mm``)
``/kernels``, named by a hash of the sources and flags, so a changed source
builds anew and concurrent processes never see a half-written file. Without
the instructions or a compiler nothing is built and the callers use
PyTorch's kernels (logged once).

Kernels:

- ``sapiens_attention_bf16`` and ``sapiens_attention_f32``: exact unmasked
  attention, head size 64 (see :func:`sapiens_mm.utils.sdpa.cpu_attention`);
- ``sapiens_rms_norm``: RMSNorm of bf16 or float32 rows in one pass
  (:func:`rms_norm`);
- ``sapiens_rope_bf16``: Sapiens2's bf16 rotary embedding of q or k in one
  pass (:func:`rope_bf16`).
"""
import ctypes
import functools
import glob
import hashlib
import os
import os.path as osp
import shutil
import subprocess
import tempfile
from typing import Optional

import torch
from mmengine.logging import print_log

from .cpu_features import cpu_kernels_supported

__all__ = ['cpu_kernel', 'rms_norm', 'rope_bf16', 'plain_cpu_inference']

_SOURCE_DIR = osp.join(osp.dirname(__file__), 'csrc')
_CFLAGS = ('-O3', '-mavx512f', '-mavx512bw', '-mavx512dq', '-mavx512vl',
           '-mavx512bf16', '-mfma', '-fPIC', '-shared', '-pthread')
_I64, _PTR = ctypes.c_int64, ctypes.c_void_p
_I64P = ctypes.POINTER(ctypes.c_int64)
# name -> (argtypes, restype) of every exported kernel.
_ATTENTION_SIGNATURE = ([_PTR] * 4 + [_I64] * 4 + [_I64P] * 4 +
                        [ctypes.c_float, ctypes.c_int], ctypes.c_int)
_SIGNATURES = {
    'sapiens_attention_bf16': _ATTENTION_SIGNATURE,
    'sapiens_attention_f32': _ATTENTION_SIGNATURE,
    'sapiens_rms_norm': ([_PTR] * 3 + [_I64] * 4 + [
        ctypes.c_int, ctypes.c_int, ctypes.c_float, ctypes.c_int
    ], ctypes.c_int),
    'sapiens_rope_bf16': ([_PTR] * 4 + [_I64] * 5 + [_I64P] * 2 +
                          [ctypes.c_int, ctypes.c_int], ctypes.c_int),
}


@functools.lru_cache(maxsize=None)
def cpu_kernel(name: str):
    """The kernel ``name`` (a key of the module's list) as a ctypes
    function with its signature set, or None on a machine that cannot run
    it (looked up once per name: the callers are on the forward path)."""
    lib = _library()
    if lib is None:
        return None
    fn = getattr(lib, name)
    fn.argtypes, fn.restype = _SIGNATURES[name]
    return fn


def plain_cpu_inference(*tensors: torch.Tensor) -> bool:
    """Whether a call on ``tensors`` is plain CPU inference: tensors or
    parameters on the CPU (no fake / functional tensors), no tracing or
    compiling, no autograd through them."""
    if (torch.compiler.is_compiling() or torch.jit.is_tracing()
            or torch.jit.is_scripting() or torch.onnx.is_in_onnx_export()):
        return False
    grad = torch.is_grad_enabled()
    return all(
        type(t) in (torch.Tensor, torch.nn.Parameter)
        and t.device.type == 'cpu' and not (grad and t.requires_grad)
        for t in tensors)


def rms_norm(x: torch.Tensor, weight: torch.Tensor,
             eps: float) -> Optional[torch.Tensor]:
    """RMSNorm over the last dim of a bf16 or float32 CPU tensor by the C
    kernel.

    Same result as PyTorch's ``F.rms_norm(x, (d,), weight, eps)`` for a
    weight of x's dtype and, for a bf16 ``x`` with a float32 weight (the
    autocast case), as ``F.rms_norm(x.float(), (d,), weight,
    eps).bfloat16()``: float32 arithmetic, one rounding for bf16. Only the
    order of the float32 sum of squares differs from PyTorch's reduction
    (measured: a few bf16 outputs per million differ, by one bf16 step;
    float32 outputs by a few float32 ulps).

    Args:
        x: (..., d) bf16 or float32 CPU tensor; rows may be strided, the
            last dim must be contiguous.
        weight: (d,) bf16 or float32 (float32 for a float32 ``x``),
            contiguous.
        eps: Added to the mean square.

    Returns:
        A new contiguous tensor shaped like ``x``, in x's dtype, or None when
        the kernel does not apply (no kernel on this machine, another
        layout or dtype, autograd or tracing): the caller then uses
        PyTorch.
    """
    dtypes = (torch.bfloat16, torch.float32)
    if (x.dim() < 1 or x.shape[-1] == 0 or x.stride(-1) != 1
            or x.dtype not in dtypes or weight.dtype not in dtypes
            or (x.dtype == torch.float32 and weight.dtype != torch.float32)
            or weight.dim() != 1 or weight.shape[0] != x.shape[-1]
            or not weight.is_contiguous()
            or not plain_cpu_inference(x, weight)):
        return None
    d = x.shape[-1]
    # a view where the rows have one stride, else a contiguous copy
    rows2d = x.reshape(-1, d)
    fn = cpu_kernel('sapiens_rms_norm')
    if fn is None:
        return None
    out = torch.empty(rows2d.shape, dtype=x.dtype)
    rows = rows2d.shape[0]
    if rows == 0:
        return out.view(x.shape)
    rc = fn(rows2d.data_ptr(), weight.data_ptr(), out.data_ptr(), rows, d,
            rows2d.stride(0), d, int(x.dtype == torch.float32),
            int(weight.dtype == torch.float32), float(eps),
            torch.get_num_threads())
    return out.view(x.shape) if rc == 0 else None


def rope_bf16(x: torch.Tensor, sin: torch.Tensor, cos: torch.Tensor,
              prefix: int) -> Optional[torch.Tensor]:
    """Sapiens2's bf16 rotary embedding of the tokens after ``prefix``, by
    the C kernel: the bits of
    :func:`sapiens_mm.models.layers.rope_position_embedding.apply_rope`
    (each op in float32 rounded once to bf16; the prefix tokens rounded to
    bf16 only), in one pass.

    Args:
        x: (B, heads, N, d) bf16 or float32 CPU tensor, last dim contiguous
            (any other strides, e.g. the attention's transposed views); d a
            multiple of 32.
        sin: (N - prefix, d) bf16 table, contiguous.
        cos: Like ``sin``.
        prefix: Leading tokens left unrotated.

    Returns:
        The rotated tensor in x's dtype and memory layout, or None when the
        kernel does not apply (the caller then uses PyTorch ops).
    """
    if (x.dim() != 4 or x.dtype not in (torch.bfloat16, torch.float32)
            or x.stride(-1) != 1 or x.shape[-1] % 32 or x.numel() == 0
            or prefix < 0 or sin.shape != cos.shape
            or sin.shape != (x.shape[2] - prefix, x.shape[3])
            or not (sin.is_contiguous() and cos.is_contiguous())
            or not sin.dtype == cos.dtype == torch.bfloat16
            or not plain_cpu_inference(x, sin, cos)):
        return None
    fn = cpu_kernel('sapiens_rope_bf16')
    if fn is None:
        return None
    # the output in x's memory order (a transposed view stays one)
    order = sorted(range(3), key=lambda i: -x.stride(i)) + [3]
    out = torch.empty([x.shape[i] for i in order],
                      dtype=x.dtype).permute(*[order.index(i)
                                               for i in range(4)])

    def strides(t):
        return (ctypes.c_int64 * 3)(*t.stride()[:3])

    b, heads, n, d = x.shape
    rc = fn(x.data_ptr(), out.data_ptr(), sin.data_ptr(), cos.data_ptr(), b,
            heads, n, d, prefix, strides(x), strides(out),
            int(x.dtype == torch.float32), torch.get_num_threads())
    return out if rc == 0 else None


@functools.lru_cache(maxsize=None)
def _library() -> Optional[ctypes.CDLL]:
    """The built library, or None (logged once) when the CPU lacks
    AVX512_BF16 or the build fails."""
    if not cpu_kernels_supported():
        return None
    compiler = os.environ.get('CC') or shutil.which('cc') or shutil.which(
        'gcc')
    if compiler is None:
        print_log(
            'No C compiler found: attention, RMSNorm and RoPE on this CPU use '
            "PyTorch's slower kernels (install gcc to build the fast ones).",
            logger='current', level=30)
        return None
    sources = sorted(glob.glob(osp.join(_SOURCE_DIR, '*.c')))
    digest = hashlib.sha256(' '.join((compiler, ) + _CFLAGS).encode())
    for path in sorted(glob.glob(osp.join(_SOURCE_DIR, '*.[ch]'))):
        with open(path, 'rb') as f:
            digest.update(osp.basename(path).encode() + f.read())
    cache = osp.join(
        os.environ.get('SAPIENS_MM_CACHE',
                       osp.join(osp.expanduser('~'), '.cache',
                                'sapiens_mm')), 'kernels')
    path = osp.join(cache, f'sapiens_cpu_kernels-{digest.hexdigest()[:16]}.so')
    try:
        if not osp.isfile(path):
            os.makedirs(cache, exist_ok=True)
            fd, tmp = tempfile.mkstemp(suffix='.so', dir=cache)
            os.close(fd)
            try:
                proc = subprocess.run(
                    [compiler, *_CFLAGS, *sources, '-o', tmp, '-lm'],
                    capture_output=True, text=True, timeout=300)
                if proc.returncode:
                    raise OSError((proc.stderr.strip().splitlines()
                                   or ['unknown error'])[-1])
                os.replace(tmp, path)  # whole files only, even when racing
            finally:
                if osp.exists(tmp):
                    os.remove(tmp)
        lib = ctypes.CDLL(path)
    except (OSError, subprocess.SubprocessError) as e:
        print_log(f'Could not build the CPU kernels ({e}); using '
                  "PyTorch's kernels.", logger='current', level=30)
        return None
    print_log(f'CPU kernels: {path}', logger='current', level=10)
    return lib
