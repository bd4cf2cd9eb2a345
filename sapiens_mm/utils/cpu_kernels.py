"""The C kernels of ``csrc/`` for x86 CPUs with AVX-512 and AVX512_BF16:
where they come from, when they run, and how they are called.

Built at install time, not at run time: ``setup.py`` compiles the plain C
sources (no PyTorch headers; about two seconds) into the extension module
``sapiens_mm.utils._cpu_kernels`` beside the package's Python files (in
place for an editable install), and this module loads that file with
ctypes. The library is trusted as the package's own files are: it is
loaded only when it is a regular file owned by you, root or the owner of
this module's file, no more writable than this file, built from the very
``csrc/`` sources beside it, and linked to the OpenMP runtime PyTorch
uses; otherwise one line in the log says why and PyTorch's ops run. No
cache folder, environment variable or search path is consulted.

Without the library (installed without a C compiler, a source checkout not
built) or on a CPU without the instructions
(:func:`sapiens_mm.utils.cpu_features.cpu_kernels_supported`), attention,
RMSNorm and RoPE run PyTorch's ops; the log says so once.

The kernels run on PyTorch's intra-op OpenMP threads (``csrc/parallel.h``),
``torch.get_num_threads()`` of them. The callers wrap them in
``torch.library`` custom ops (``sapiens_mm::cpu_attention``,
``sapiens_mm::cpu_rms_norm``, ``sapiens_mm::cpu_rope``) so that
``torch.compile`` and ``torch.export`` keep them; :func:`pytorch_ops_only`
leaves them out of a graph that must run without this package (ONNX, a
``.pt2`` for another machine).

Kernels:

- ``sapiens_attention_bf16`` and ``sapiens_attention_f32``: exact unmasked
  attention, head size 64 (see :func:`sapiens_mm.utils.sdpa.cpu_attention`);
- ``sapiens_rms_norm``: RMSNorm of bf16 or float32 rows in one pass
  (:func:`rms_norm`);
- ``sapiens_rope_bf16``: Sapiens2's bf16 rotary embedding of q or k in one
  pass (:func:`rope_bf16`).
"""
import contextlib
import contextvars
import ctypes
import functools
import os
import os.path as osp
import re
import stat
import sysconfig
from typing import Iterator, Optional

import torch
from mmengine.logging import print_log

from .cpu_features import CPU_KERNEL_FEATURES, cpu_kernels_supported
from .cpu_kernels_build import source_digest

__all__ = ['cpu_kernel', 'kernel_available', 'cpu_kernels_path',
           'load_library', 'rms_norm',
           'rms_norm_fits', 'rope_bf16', 'rope_fits', 'strided_like',
           'plain_cpu_inference', 'kernel_route', 'pytorch_ops_only',
           'openmp_runtimes']

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
_REBUILD = ('rebuild it: `pip install -e .` (or `python setup.py build_ext '
            '--inplace`) in the checkout, or reinstall sapiens_mm')
# Whether the callers may take the kernels (see pytorch_ops_only).
_ENABLED: contextvars.ContextVar = contextvars.ContextVar(
    'sapiens_cpu_kernels_enabled', default=True)


def cpu_kernels_path() -> str:
    """Where the installed kernel library is (or would be): beside this
    module, named as setuptools names the extension module."""
    return osp.join(osp.dirname(osp.abspath(__file__)),
                    '_cpu_kernels' + sysconfig.get_config_var('EXT_SUFFIX'))


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


@torch.compiler.assume_constant_result
def kernel_available(name: str) -> bool:
    """Whether the kernel ``name`` runs on this machine (a constant for
    ``torch.compile``, which does not trace into the loading)."""
    return cpu_kernel(name) is not None


@contextlib.contextmanager
def pytorch_ops_only() -> Iterator[None]:
    """Inside the context attention, RMSNorm and RoPE run PyTorch's ops
    only, never the C kernels or their custom ops: for a graph that leaves
    this package (an ONNX file, a ``.pt2`` for the standalone runner or
    another machine), which then holds standard ATen ops only."""
    token = _ENABLED.set(False)
    try:
        yield
    finally:
        _ENABLED.reset(token)


def kernel_route(*tensors: torch.Tensor) -> bool:
    """Whether a call on ``tensors`` may go to a C kernel's custom op: CPU
    tensors (real ones, or the fake / functional ones of ``torch.compile``
    and ``torch.export``, which then record the op), no autograd through
    them, no TorchScript or ONNX tracing, not inside
    :func:`pytorch_ops_only`. The caller checks dtypes and layout."""
    if (not _ENABLED.get() or torch.jit.is_tracing()
            or torch.jit.is_scripting() or torch.onnx.is_in_onnx_export()):
        return False
    grad = torch.is_grad_enabled()
    return all(t.device.type == 'cpu' and not (grad and t.requires_grad)
               for t in tensors)


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


def rms_norm_fits(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether :func:`rms_norm` computes ``x`` with ``weight`` on this
    machine (dtypes, layout, the kernel built and runnable here)."""
    dtypes = (torch.bfloat16, torch.float32)
    return (x.dim() >= 1 and x.shape[-1] > 0 and x.stride(-1) == 1
            and x.dtype in dtypes and weight.dtype in dtypes
            and not (x.dtype == torch.float32
                     and weight.dtype != torch.float32)
            and weight.dim() == 1 and weight.shape[0] == x.shape[-1]
            and weight.is_contiguous()
            and kernel_available('sapiens_rms_norm'))


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
    if not (rms_norm_fits(x, weight) and plain_cpu_inference(x, weight)):
        return None
    d = x.shape[-1]
    # a view where the rows have one stride, else a contiguous copy
    rows2d = x.reshape(-1, d)
    out = torch.empty(rows2d.shape, dtype=x.dtype)
    rows = rows2d.shape[0]
    if rows == 0:
        return out.view(x.shape)
    cpu_kernel('sapiens_rms_norm')(
        rows2d.data_ptr(), weight.data_ptr(), out.data_ptr(), rows, d,
        rows2d.stride(0), d, int(x.dtype == torch.float32),
        int(weight.dtype == torch.float32), float(eps),
        torch.get_num_threads())
    return out.view(x.shape)


def rope_fits(x: torch.Tensor, sin: torch.Tensor, cos: torch.Tensor,
              prefix: int) -> bool:
    """Whether :func:`rope_bf16` rotates ``x`` with these tables on this
    machine (dtypes, layout, the kernel built and runnable here)."""
    return (x.dim() == 4 and x.dtype in (torch.bfloat16, torch.float32)
            and x.stride(-1) == 1 and x.shape[-1] % 32 == 0
            and x.numel() > 0 and prefix >= 0 and sin.shape == cos.shape
            and sin.shape == (x.shape[2] - prefix, x.shape[3])
            and sin.is_contiguous() and cos.is_contiguous()
            and sin.dtype == cos.dtype == torch.bfloat16
            and kernel_available('sapiens_rope_bf16'))


def strided_like(x: torch.Tensor) -> torch.Tensor:
    """An empty tensor shaped like the 4-d ``x`` whose memory order is
    x's (a transposed view stays one), with dense strides."""
    order = sorted(range(3), key=lambda i: -x.stride(i)) + [3]
    return x.new_empty([x.shape[i] for i in order]).permute(
        *[order.index(i) for i in range(4)])


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
        The rotated tensor in x's dtype and memory layout
        (:func:`strided_like`), or None when the kernel does not apply
        (the caller then uses PyTorch ops).
    """
    if not (rope_fits(x, sin, cos, prefix)
            and plain_cpu_inference(x, sin, cos)):
        return None
    out = strided_like(x)

    def strides(t):
        return (ctypes.c_int64 * 3)(*t.stride()[:3])

    b, heads, n, d = x.shape
    cpu_kernel('sapiens_rope_bf16')(
        x.data_ptr(), out.data_ptr(), sin.data_ptr(), cos.data_ptr(), b,
        heads, n, d, prefix, strides(x), strides(out),
        int(x.dtype == torch.float32), torch.get_num_threads())
    return out


@functools.lru_cache(maxsize=None)
def _library() -> Optional[ctypes.CDLL]:
    """The installed library, or None (logged once) where this CPU lacks
    the instructions or the library is missing, refused or stale."""
    if not cpu_kernels_supported():
        print_log(
            "This CPU lacks the C kernels' instructions "
            f'({", ".join(CPU_KERNEL_FEATURES)}): attention, RMSNorm and '
            "RoPE run PyTorch's ops.", logger='current', level=20)
        return None
    path = cpu_kernels_path()
    if not osp.exists(path):
        print_log(
            f'The CPU kernels are not built ({path} is missing: installed '
            'without a C compiler, or a checkout not built): attention, '
            f"RMSNorm and RoPE run PyTorch's slower ops; {_REBUILD}.",
            logger='current', level=30)
        return None
    return load_library(path)


def load_library(path: str,
                 reference: Optional[str] = None) -> Optional[ctypes.CDLL]:
    """Load the kernel library at ``path`` if it is as trusted as the
    Python file ``reference`` (default: this module) and built from the
    sources beside this module; else log one line saying why and return
    None.

    Trusted: a regular file (not a link) owned by the current user, root
    or the owner of ``reference``, with no group / other write permission
    that ``reference`` lacks. It is checked before it is loaded: a library
    planted by another user never runs its code here.
    """
    why = _untrusted(path, reference or osp.abspath(__file__))
    if why is not None:
        print_log(f'Refusing the CPU kernel library {path}: {why}; '
                  f"PyTorch's ops run instead ({_REBUILD}).",
                  logger='current', level=30)
        return None
    try:
        lib = ctypes.CDLL(path)
        sources_of = lib.sapiens_kernels_sources
    except (OSError, AttributeError) as e:
        print_log(f'Could not load the CPU kernels ({e}); using '
                  f"PyTorch's ops ({_REBUILD}).", logger='current',
                  level=30)
        return None
    sources_of.restype = ctypes.c_char_p
    if sources_of().decode() != source_digest():
        print_log(
            f'The CPU kernel library {path} was built from other sources '
            "than the csrc/ beside it; PyTorch's ops run instead "
            f'({_REBUILD}).', logger='current', level=30)
        return None
    runtimes = openmp_runtimes()
    if len(runtimes) > 1:
        print_log(
            'Two OpenMP runtimes in this process after loading the CPU '
            f'kernels ({", ".join(runtimes)}): their threads would compete '
            "with PyTorch's; PyTorch's ops run instead.", logger='current',
            level=30)
        return None
    print_log(f'CPU kernels: {path}', logger='current', level=10)
    return lib


def _untrusted(path: str, reference: str) -> Optional[str]:
    """Why the library at ``path`` is less trusted than the file
    ``reference``, or None."""
    try:
        st, ref = os.lstat(path), os.stat(reference)
    except OSError as e:
        return f'cannot read it ({e.strerror})'
    if not stat.S_ISREG(st.st_mode):
        return 'not a regular file'
    owners = {0, os.getuid(), ref.st_uid}
    if st.st_uid not in owners:
        return (f'owned by uid {st.st_uid}, not by you, root or the owner '
                f'of the package files (uid {ref.st_uid})')
    extra = st.st_mode & 0o022 & ~ref.st_mode
    if extra:
        who = {0o020: 'group', 0o002: 'others'}.get(extra, 'group and others')
        return (f'writable by {who} ({stat.filemode(st.st_mode)}), unlike '
                f'the package files ({stat.filemode(ref.st_mode)})')
    return None


def openmp_runtimes() -> list:
    """The OpenMP runtime libraries mapped into this process (Linux; empty
    elsewhere)."""
    try:
        with open('/proc/self/maps') as f:
            maps = f.read()
    except OSError:
        return []
    pattern = re.compile(r'\s(/\S*/lib(?:gomp|omp|iomp5)[-.\w]*\.so[.\d]*)$',
                         re.M)
    return sorted({osp.realpath(p) for p in pattern.findall(maps)})
