"""Speed of Sapiens models against a limit computed from the machine.

:func:`benchmark_model` times a model (a Sapiens backbone or a whole task
model) and compares it with a **limit**: the time its FLOPs would take at the
rates this machine's kernels reach on the model's own shapes, measured in the
same run:

- *matmul-like* work (``nn.Linear``, ``nn.Conv2d`` including the patch
  embedding, ``nn.ConvTranspose2d``) is timed as the equivalent GEMM
  (``tokens x in -> out``; for a convolution ``B*Ho*Wo x Cin*kh*kw -> Cout``)
  with ``F.linear`` in the compute dtype;
- *attention* (QK^T and AV) is timed by calling the attention function the
  model's attention modules use (``module.scaled_dot_product_attention``,
  PyTorch's ``F.scaled_dot_product_attention`` in mmpretrain and in the
  Sapiens2 attention) on tensors with the model's own sizes, strides and
  dtype, with the same keyword arguments (Sapiens2's grouped-query blocks
  pass ``enable_gqa`` with K/V of fewer heads than Q).

``limit = sum_i flops_i / rate_i`` and ``achieved/limit = limit / latency``.
Everything else the model does (layer norms, activations, residual adds,
copies, Python) counts as overhead against the limit.

Example:
    >>> from sapiens_mm.apis.benchmark import (benchmark_model, build_backbone,
    ...                                        format_report)
    >>> model = build_backbone('sapiens_tiny', (256, 192))
    >>> result = benchmark_model(model, batch_size=1, img_size=(256, 192))
    >>> text = format_report(result)
"""
import contextlib
import copy
import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Literal, Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from sapiens_mm.apis.inference import check_batch_size
from sapiens_mm.utils.sdpa import (
    SDPA_BACKENDS,
    resolve_sdpa_backend,
    sdpa_backend,
)

__all__ = [
    'DTYPES', 'COMPILE_MODES', 'KNOWN_GPU_PEAK_TFLOPS', 'WorkItem', 'Work',
    'TimingStats', 'build_backbone', 'is_sapiens2_arch',
    'build_stock_backbone',
    'count_work', 'kernel_calls', 'measure_rates', 'limit_seconds',
    'time_callable',
    'PeakMemory', 'benchmark_model', 'end_to_end',
    'gpu_peak_tflops', 'format_report', 'format_end_to_end', 'benchmark_decode',
    'format_decode', 'result_to_json'
]

DTYPES = {
    'fp32': torch.float32,
    'bf16': torch.bfloat16,
    'fp16': torch.float16,
}
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

Precision = Literal['cast', 'autocast']
#: ``torch.compile`` modes :func:`benchmark_model` accepts.
COMPILE_MODES = ('default', 'reduce-overhead', 'max-autotune',
                 'max-autotune-no-cudagraphs')


# ------------------------------------------------------------- building
def build_backbone(arch, img_size: Tuple[int, int] = (1024, 768),
                   patch_cfg: Optional[dict] = None,
                   num_layers: Optional[int] = None) -> nn.Module:
    """A randomly initialised ``SapiensVisionTransformer`` or (for a
    ``sapiens2_*`` arch) ``Sapiens2VisionTransformer`` in eval mode.

    Args:
        arch: An ``arch_zoo`` name (``'sapiens_0.3b'``, ``'1b'``,
            ``'sapiens2_0.4b'``, ...) or a Sapiens ``arch`` dict.
        img_size: (H, W) of the ``pos_embed`` grid (Sapiens2: informative
            only).
        patch_cfg: ``PatchEmbed`` options (pose / normal use
            ``dict(padding=2)``); Sapiens only.
        num_layers: Keep only the first N encoder layers (quick runs). The
            Sapiens2 blocks kept have the K/V heads they have in the full
            model.
    """
    from sapiens_mm.models.backbones import (Sapiens2VisionTransformer,
                                             SapiensVisionTransformer)
    if not is_sapiens2_arch(arch):
        if num_layers:
            arch = dict(SapiensVisionTransformer.arch_zoo[arch.lower()],
                        num_layers=num_layers)
        return SapiensVisionTransformer(
            arch=arch, img_size=tuple(img_size), patch_cfg=patch_cfg).eval()
    if patch_cfg:
        raise ValueError('Sapiens2 backbones take no patch_cfg (their '
                         'patch embedding has no padding).')
    kwargs = {}
    if num_layers:
        full = dict(Sapiens2VisionTransformer.arch_zoo[arch.lower()])
        kv = Sapiens2VisionTransformer.default_kv_heads(
            full['num_layers'], full['num_heads'])[:num_layers]
        kwargs = dict(layer_cfgs=[dict(num_kv_heads=n) for n in kv],
                      use_tokenizer=full.pop('use_tokenizer'))
        arch = dict(full, num_layers=len(kv))
    return Sapiens2VisionTransformer(
        arch=arch, img_size=tuple(img_size), **kwargs).eval()


def is_sapiens2_arch(arch) -> bool:
    """Whether the arch name ``arch`` is a Sapiens2 one (``sapiens2_*``)."""
    return isinstance(arch, str) and arch.lower().startswith('sapiens2')


def build_stock_backbone(backbone: nn.Module) -> nn.Module:
    """The backbone to compare with: for a ``SapiensVisionTransformer``
    mmpretrain's own ``VisionTransformer`` with its arch, options and
    weights (a ``state_dict`` copy); for a ``Sapiens2VisionTransformer``
    (which has no stock counterpart) the plain-PyTorch
    :class:`~sapiens_mm.models.reference.Sapiens2Reference` on its weights.

    Raises:
        TypeError: ``backbone`` is neither.
    """
    from mmpretrain.models.backbones import VisionTransformer

    from sapiens_mm.models.backbones import (Sapiens2VisionTransformer,
                                             SapiensVisionTransformer)
    if isinstance(backbone, Sapiens2VisionTransformer):
        from sapiens_mm.models.reference import Sapiens2Reference
        return Sapiens2Reference.from_backbone(backbone).eval()
    if not isinstance(backbone, SapiensVisionTransformer):
        raise TypeError(
            f'--compare-stock needs a SapiensVisionTransformer or '
            f'Sapiens2VisionTransformer backbone, got '
            f'{type(backbone).__name__}.')
    layer = backbone.layers[0]
    arch = dict(
        embed_dims=backbone.embed_dims,
        num_layers=backbone.num_layers,
        num_heads=layer.attn.num_heads,
        feedforward_channels=layer.ffn.feedforward_channels)
    pe = backbone.patch_embed.projection
    stock = VisionTransformer(
        arch=arch,
        img_size=tuple(backbone.patch_embed.init_input_size),
        patch_size=pe.kernel_size[0],
        out_indices=list(backbone.out_indices),
        out_type=backbone.out_type,
        with_cls_token=backbone.with_cls_token,
        final_norm=backbone.final_norm,
        interpolate_mode=backbone.interpolate_mode,
        patch_cfg=dict(padding=pe.padding[0]),
        norm_cfg=dict(type='LN', eps=backbone.ln1.eps),
        pre_norm=not isinstance(backbone.pre_norm, nn.Identity))
    stock.load_state_dict(backbone.state_dict(), strict=True)
    stock.eval()  # returns None in mmpretrain
    return stock.to(next(backbone.parameters()).device)


# ---------------------------------------------------------- FLOP counting
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
    """
    items: Dict[WorkItem, int] = field(default_factory=dict)
    attention_fns: Dict[WorkItem, Callable] = field(default_factory=dict)
    attention_args: Dict[WorkItem, tuple] = field(default_factory=dict)

    def flops(self, kind: Optional[str] = None) -> int:
        """Total FLOPs (of one ``kind``, or all)."""
        return sum(it.flops * n for it, n in self.items.items()
                   if kind is None or it.kind == kind)


def _compute_dtype(t: torch.Tensor, weight: torch.Tensor) -> torch.dtype:
    dev = t.device.type
    if torch.is_autocast_enabled(dev) and t.is_floating_point():
        return torch.get_autocast_dtype(dev)
    return weight.dtype


def _storage_spec(t: torch.Tensor) -> tuple:
    return (tuple(t.shape), tuple(t.stride()), t.storage_offset(),
            t.untyped_storage().nbytes() // t.element_size())


def count_work(model: nn.Module, run: Callable[[], object]) -> Work:
    """Record the matmul-like and attention calls of one forward pass.

    ``nn.Linear``, ``nn.Conv2d`` and ``nn.ConvTranspose2d`` calls are
    recorded by forward hooks; attention calls by wrapping, for the duration
    of ``run``, the ``scaled_dot_product_attention`` attribute of every
    module that has one (mmpretrain's ``MultiheadAttention``).

    Args:
        model: The model ``run`` calls.
        run: Runs one forward pass (with the dtype / autocast to measure).

    Returns:
        Work: The calls, grouped by shape and dtype.
    """
    work = Work()

    def add(item: WorkItem, n: int = 1):
        work.items[item] = work.items.get(item, 0) + n

    def linear_hook(mod, args, out):
        x = args[0]
        k = mod.in_features
        m = x.numel() // k
        n = mod.out_features
        add(WorkItem('matmul', (m, k, n), _compute_dtype(x, mod.weight),
                     2 * m * k * n))

    def conv_hook(mod, args, out):
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
            return fn(q, k, v, *args, **kwargs)
        return recorded

    handles, wrapped = [], []
    for mod in model.modules():
        if isinstance(mod, nn.Linear):
            handles.append(mod.register_forward_hook(linear_hook))
        elif isinstance(mod, (nn.Conv2d, nn.ConvTranspose2d)):
            handles.append(mod.register_forward_hook(conv_hook))
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


# ------------------------------------------------------------ timing
def _sync(device: torch.device) -> None:
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


@dataclass
class TimingStats:
    """Wall times of repeated runs, in seconds."""
    times: List[float]

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def min(self) -> float:
        return min(self.times)

    @property
    def max(self) -> float:
        return max(self.times)

    @property
    def iqr(self) -> float:
        """Interquartile range (0 with fewer than 4 runs... see
        ``statistics.quantiles``: the 'inclusive' method, defined from 2
        runs on)."""
        if len(self.times) < 2:
            return 0.0
        q = statistics.quantiles(self.times, n=4, method='inclusive')
        return q[2] - q[0]


def time_callable(fn: Callable[[], object], device: torch.device,
                  warmup: int = 1, repeats: int = 3,
                  min_time: float = 0.0) -> TimingStats:
    """Time ``fn`` after ``warmup`` calls: ``repeats`` calls, more while
    their total is below ``min_time`` seconds (at most 100)."""
    for _ in range(warmup):
        fn()
    _sync(device)
    times: List[float] = []
    while len(times) < repeats or (sum(times) < min_time
                                   and len(times) < 100):
        start = time.perf_counter()
        fn()
        _sync(device)
        times.append(time.perf_counter() - start)
    return TimingStats(times)


def kernel_calls(work: Work,
                 device: torch.device) -> Dict[WorkItem, Callable[[], object]]:
    """One callable per distinct call of ``work`` that runs the kernel on
    random inputs of the recorded shape and dtype.

    Matmuls run ``F.linear(x (M, K), w (N, K), bias (N))``; attention runs
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
            w = torch.randn(n, k, generator=gen, device=device,
                            dtype=item.dtype) / math.sqrt(k)
            b = torch.randn(n, generator=gen, device=device,
                            dtype=item.dtype)

            def fn(x=x, w=w, b=b):
                with torch.inference_mode():
                    return F.linear(x, w, b)
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


# ------------------------------------------------------------ memory
class PeakMemory:
    """Peak memory of the code run inside the context.

    CUDA: ``torch.cuda.max_memory_allocated`` (reset on entry). CPU: the
    resident-set high-water mark of the process (``VmHWM``, reset on entry
    through ``/proc/self/clear_refs`` on Linux; elsewhere
    ``resource.getrusage`` cannot be reset and gives the process peak).

    Attributes:
        peak: Peak bytes (allocated tensors on CUDA, resident memory on
            CPU) while inside.
        base: Bytes at entry (same measure).
        exact: False when the CPU peak could not be reset (it may then
            predate the context).
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.peak = self.base = 0
        self.exact = True

    @staticmethod
    def _status(key: str) -> Optional[int]:
        try:
            with open('/proc/self/status') as f:
                for line in f:
                    if line.startswith(key + ':'):
                        return int(line.split()[1]) * 1024
        except OSError:
            return None
        return None

    def __enter__(self) -> 'PeakMemory':
        if self.device.type == 'cuda':
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.base = torch.cuda.memory_allocated(self.device)
            return self
        try:
            with open('/proc/self/clear_refs', 'w') as f:
                f.write('5')  # resets VmHWM to the current RSS
        except OSError:
            self.exact = False
        self.base = self._status('VmRSS') or 0
        return self

    def __exit__(self, *exc) -> None:
        if self.device.type == 'cuda':
            torch.cuda.synchronize(self.device)
            self.peak = torch.cuda.max_memory_allocated(self.device)
            return
        peak = self._status('VmHWM')
        if peak is None:
            import resource
            scale = 1 if sys.platform == 'darwin' else 1024
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
            self.exact = False
        self.peak = peak


# ------------------------------------------------------------ benchmark
def _precision_ctx(device: torch.device, dtype: torch.dtype,
                   precision: Precision):
    if dtype == torch.float32 or precision == 'cast':
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def _prepare(model: nn.Module, device: torch.device, dtype: torch.dtype,
             precision: Precision) -> nn.Module:
    model = model.to(device)
    model.eval()  # mmpretrain's VisionTransformer.eval() returns None
    if precision == 'cast' and dtype != torch.float32:
        model = model.to(dtype)
    return model


def _forward_fn(model: nn.Module) -> Callable[[torch.Tensor], object]:
    """The tensor-mode forward of a backbone or a task model."""
    if hasattr(model, 'backbone') and hasattr(model, 'data_preprocessor'):
        return lambda x: model(x, None, mode='tensor')
    return model


def _first_tensor(out) -> torch.Tensor:
    while isinstance(out, (tuple, list)):
        out = out[0]
    return out


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


def benchmark_model(model: nn.Module,
                    batch_size: int = 1,
                    img_size: Tuple[int, int] = (1024, 768),
                    dtype: str = 'fp32',
                    precision: Precision = 'cast',
                    device: str = 'cpu',
                    warmup: int = 1,
                    repeats: int = 3,
                    compile: bool = False,
                    compare_stock: bool = False,
                    rate_min_time: float = 0.1,
                    peak_tflops: Optional[float] = None,
                    seed: int = 0,
                    compile_mode: Optional[str] = None,
                    sdpa: str = 'auto',
                    cuda_graph: bool = False,
                    channels_last: bool = False) -> dict:
    """Time a model, compute its limit and optionally compare with stock.

    Args:
        model: A Sapiens backbone or a task model (timed through its
            tensor-mode forward).
        batch_size: Images per forward pass.
        img_size: (H, W) of the input.
        dtype: ``'fp32'``, ``'bf16'`` or ``'fp16'``.
        precision: How a reduced ``dtype`` is applied: ``'cast'`` (weights
            and input in ``dtype``, no autocast) or ``'autocast'``
            (``torch.autocast``, fp32 weights).
        device: ``'cpu'``, ``'cuda'``, ``'cuda:N'``.
        warmup: Untimed forward passes before timing, counting the one
            that records the FLOPs (without ``compile``); the compiled model
            gets all of them, the first one pays for the compilation.
        repeats: Timed forward passes.
        compile: ``torch.compile`` the backbone (in place) before timing;
            the warm-up pays for the compilation (give ``warmup >= 1``).
        compare_stock: Also time the comparison backbone of
            :func:`build_stock_backbone` (mmpretrain's ``VisionTransformer``
            for Sapiens, the plain-PyTorch reference for Sapiens2) with the
            same arch and weights (backbone, or the task model's backbone
            swapped for it) on the same input and dtype.
        rate_min_time: Seconds each kernel is timed for in each round.
        peak_tflops: The device's peak in TFLOP/s for the chosen dtype;
            on a GPU it defaults to :data:`KNOWN_GPU_PEAK_TFLOPS`. Gives
            ``peak_fraction``, the achieved share of it.
        seed: Seed of the random input.
        compile_mode: ``torch.compile`` mode (:data:`COMPILE_MODES`, e.g.
            ``'reduce-overhead'``: CUDA graphs of the compiled code on a
            GPU; ``'max-autotune'``: also searches GEMM kernels); implies
            ``compile``. None: the default mode.
        sdpa: Attention kernel of our model and of the limit's attention
            timings (:func:`sapiens_mm.utils.sdpa.sdpa_backend`):
            ``'auto'`` (PyTorch's choice), ``'cudnn'``, ``'flash'``,
            ``'efficient'`` or ``'math'``; CUDA-only kernels fall back to
            ``'auto'`` on CPU.
        cuda_graph: Capture our model's forward pass as one CUDA graph
            (:class:`sapiens_mm.utils.cuda_graph_forward.CUDAGraphForward`)
            and time its replays (CUDA only).
        channels_last: Convert our model's 4-D weights (patch embedding,
            head convolutions) to the channels-last memory format.

    The stock model always runs as mmpretrain ships it (eager, PyTorch's
    attention choice, contiguous weights): ``stock_speedup`` measures the
    options too.

    Returns:
        dict: ``latency`` (:class:`TimingStats`, seconds per batch),
        ``images_per_s``, ``flops`` (per batch, total / ``matmul`` /
        ``attention``), ``gflops_per_s``, ``limit_s`` (total / per kind),
        ``achieved_over_limit``, ``rates`` (per kernel), ``peak_mem`` /
        ``base_mem`` (bytes), ``peak_tflops`` / ``peak_fraction`` (GPU),
        ``options`` (compile mode, SDPA backend in effect, CUDA graph,
        channels-last), ``eager_max_abs_diff`` (compiled / graphed output
        against our eager output, when one of them is on), and with
        ``compare_stock``: ``stock_label`` (``'stock mmpretrain'`` or
        ``'plain reference'``), ``stock_latency``, ``stock_speedup`` (stock
        median / ours) and ``stock_max_abs_diff`` (against the output of the
        timed configuration).

    Raises:
        ValueError: Bad ``dtype``, ``precision``, ``batch_size``, sizes,
            ``compile_mode`` or ``sdpa``, or ``cuda_graph`` off CUDA.
    """
    if dtype not in DTYPES:
        raise ValueError(f'dtype must be one of {sorted(DTYPES)}, got '
                         f'{dtype!r}.')
    if precision not in ('cast', 'autocast'):
        raise ValueError(f'precision must be "cast" or "autocast", got '
                         f'{precision!r}.')
    check_batch_size(batch_size)
    if len(img_size) != 2 or min(img_size) < 16:
        raise ValueError(f'img_size must be (H, W) of at least 16 pixels, '
                         f'got {img_size!r}.')
    if repeats < 1 or warmup < 0:
        raise ValueError('repeats must be >= 1 and warmup >= 0.')
    if compile_mode is not None and compile_mode not in COMPILE_MODES:
        raise ValueError(f'compile_mode must be one of {list(COMPILE_MODES)},'
                         f' got {compile_mode!r}.')
    compile = compile or compile_mode is not None
    dev = torch.device(device)
    if dev.type == 'cuda' and not torch.cuda.is_available():
        raise RuntimeError(f'device={device!r} but CUDA is not available.')
    if cuda_graph and dev.type != 'cuda':
        raise ValueError(f'cuda_graph needs a CUDA device, got {device!r}; '
                         'leave it off on CPU.')
    sdpa = resolve_sdpa_backend(sdpa, dev)
    torch_dtype = DTYPES[dtype]
    stock, stock_label = None, None
    if compare_stock:
        backbone = getattr(model, 'backbone', model)
        stock_backbone = build_stock_backbone(backbone)
        stock_label = ('plain reference' if type(stock_backbone).__name__
                       == 'Sapiens2Reference' else 'stock mmpretrain')
        if backbone is model:
            stock = stock_backbone
        else:
            stock = copy.deepcopy(model)
            stock.backbone = stock_backbone
    model = _prepare(model, dev, torch_dtype, precision)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    in_dtype = torch_dtype if precision == 'cast' else torch.float32
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch_size, 3, *img_size, generator=gen).to(
        device=dev, dtype=in_dtype)

    def runner(m, backend='auto'):
        fwd = _forward_fn(m)

        def forward(inputs):
            with torch.inference_mode(), _precision_ctx(
                    dev, torch_dtype, precision), sdpa_backend(backend, dev):
                return fwd(inputs)
        return forward

    # The counting pass is also the first warm-up pass (a forward pass of
    # a big model in emulated bf16 takes minutes) and gives the output.
    forward = runner(model, sdpa)
    outs = []
    work = count_work(model, lambda: outs.append(forward(x)))
    out = _first_tensor(outs.pop()).float()
    if compile:  # in place: keeps the tensor-mode forward / ``backbone``
        getattr(model, 'backbone', model).compile(
            **({} if compile_mode in (None, 'default') else
               dict(mode=compile_mode)))
    kernels = {
        it: _with_sdpa(fn, sdpa, dev) if it.kind == 'attention' else fn
        for it, fn in kernel_calls(work, dev).items()
    }
    stock_run, stock_outs = None, []
    if stock is not None:
        stock = _prepare(stock, dev, torch_dtype, precision)
        stock_fwd = runner(stock)

        def stock_run():
            stock_outs[:] = [stock_fwd(x)]

    # Warm-up, then rounds of: our model and the stock model (which one
    # goes first alternates), one timing of each kernel. Interleaving keeps
    # the ratios fair when other jobs load the machine unevenly over time;
    # alternating keeps them fair on a GPU, whose clocks are still settling
    # from the kernel timings when the next round starts (measured on an
    # H200: the first model of a round ran ~6 % slower).
    for _ in range(warmup if compile else max(0, warmup - 1)):
        forward(x)
    if cuda_graph:  # captured after the warm-up (compilation included)
        from sapiens_mm.utils.cuda_graph_forward import CUDAGraphForward
        graphed = CUDAGraphForward(forward, x, warmup=1)

        def run():
            return graphed(x)
    else:
        def run():
            return forward(x)
    for _ in range(warmup if stock is not None else 0):
        stock_run()
    for fn in kernels.values():
        fn()
    _sync(dev)
    times, stock_times = [], []
    kernel_times: Dict[WorkItem, List[float]] = {it: [] for it in kernels}
    peak = stock_peak = base = 0
    exact = True

    def time_stock():
        nonlocal stock_peak
        if stock_run is not None:
            with PeakMemory(dev) as mem:
                stock_times.extend(time_callable(stock_run, dev, warmup=0,
                                                 repeats=1).times)
            stock_peak = max(stock_peak, mem.peak)

    last = []  # the output of the last timed run (a graph reuses its own)

    def run_and_keep():
        last[:] = [run()]

    for i in range(repeats):
        if i % 2:
            time_stock()
        with PeakMemory(dev) as mem:
            times += time_callable(run_and_keep if i == repeats - 1 else run,
                                   dev, warmup=0, repeats=1).times
        peak, base = max(peak, mem.peak), max(base, mem.base)
        exact = exact and mem.exact
        if not i % 2:
            time_stock()
        for it, fn in kernels.items():
            kernel_times[it].append(
                time_callable(fn, dev, warmup=0, repeats=1,
                              min_time=rate_min_time).median)
    final = _first_tensor(last.pop()).float().clone()
    stats = TimingStats(times)
    rates = {
        it: it.flops / statistics.median(ts)
        for it, ts in kernel_times.items()
    }
    flops = work.flops()
    limit = limit_seconds(work, rates)
    result = dict(
        batch_size=batch_size, img_size=tuple(img_size), dtype=dtype,
        precision=precision, device=str(dev), compile=compile,
        threads=torch.get_num_threads() if dev.type == 'cpu' else None,
        latency=stats, images_per_s=batch_size / stats.median,
        flops=dict(total=flops, matmul=work.flops('matmul'),
                   attention=work.flops('attention')),
        gflops_per_s=flops / stats.median / 1e9,
        limit_s=dict(total=limit, matmul=limit_seconds(work, rates, 'matmul'),
                     attention=limit_seconds(work, rates, 'attention')),
        achieved_over_limit=limit / stats.median,
        rates={it: (n, rates[it]) for it, n in work.items.items()},
        peak_mem=peak, base_mem=base, mem_exact=exact,
        options=dict(compile_mode=(compile_mode or 'default') if compile
                     else None, sdpa=sdpa, cuda_graph=cuda_graph,
                     channels_last=channels_last))
    if compile or cuda_graph:
        result['eager_max_abs_diff'] = float((final - out).abs().max())
    if dev.type == 'cuda' or peak_tflops:
        peak_t = peak_tflops or gpu_peak_tflops(dev)
        result['peak_tflops'] = peak_t
        result['peak_fraction'] = (flops / stats.median / 1e12 / peak_t
                                   if peak_t else None)
    if stock_run is not None:
        stock_stats = TimingStats(stock_times)
        stock_out = _first_tensor(stock_outs.pop()).float()
        result.update(
            stock_label=stock_label,
            stock_latency=stock_stats,
            stock_speedup=stock_stats.median / stats.median,
            stock_peak_mem=stock_peak,
            stock_max_abs_diff=float((final - stock_out).abs().max()))
    return result


def _with_sdpa(fn: Callable[[], object], backend: str,
               device: torch.device) -> Callable[[], object]:
    """``fn`` run under :func:`sapiens_mm.utils.sdpa.sdpa_backend`."""
    if backend == 'auto':
        return fn

    def run():
        with sdpa_backend(backend, device):
            return fn()
    return run


def end_to_end(inferencer, source: str, out_dir: str,
               batch_size: int = 1, warmup_images: int = 1,
               repeats: int = 3, bboxes=None,
               max_frames: Optional[int] = None) -> dict:
    """Throughput of a :class:`SapiensInferencer` on a folder of images or
    a video, against the model-only throughput of its task models on the
    same work.

    The inferencer runs once on the first ``warmup_images`` frames
    (warm-up), then on the whole ``source`` (decode, person detection, pre-
    processing, models, decoding, post-processing, writing to ``out_dir``).

    Model-only time is measured on the first ``batch_size`` frames, pre-
    processed by the inferencer itself: each dense task's tensor-mode
    forward pass on the batch, and the pose model's on those frames' person
    crops in chunks of ``batch_size`` (the inferencer's batching; twice,
    the second time flipped, when the pose config's ``test_cfg`` has
    ``flip_test``, as its ``test_step`` does), with the inferencer's device,
    dtype and compile setting; ``repeats`` timings, half before and
    half after the run. The run's model-only time is then ``frames /
    batch_size`` dense passes plus ``crops / sample crops`` pose passes,
    ``crops`` being the number of people the run found (the detector's
    count varies from frame to frame).

    Args:
        inferencer: The :class:`SapiensInferencer` to time.
        source: A folder of images or a video file.
        out_dir: Where the inferencer writes.
        batch_size: Frames (dense tasks) / crops (pose) per forward pass.
        warmup_images: Frames of the warm-up run.
        repeats: Model-only timings of each kind.
        bboxes: Person boxes for pose, as ``SapiensInferencer.stream``
            takes them (one N x 4 array for every frame, or one per input);
            None: the inferencer's detector.
        max_frames: Read at most this many frames of a video.

    Returns:
        dict: ``images`` (frames), ``e2e_s`` (total wall time),
        ``e2e_images_per_s``, ``tasks``, ``crops_per_image`` (people per
        frame in the run), ``model_latency`` (:class:`TimingStats` of the
        model-only passes of one batch: dense + pose), ``model_batch_s``
        (median seconds of the dense and of the pose passes of that batch,
        and its number of crops), ``model_s`` (the run's model-only time),
        ``model_images_per_s`` and ``ratio``
        (end-to-end / model-only throughput).

    Raises:
        ValueError: The source has no image or frame.
    """
    import itertools
    import tempfile

    from mmengine.dataset import pseudo_collate

    from sapiens_mm.apis.inferencers.utils import collect_sources, iter_frames
    from sapiens_mm.detection import boxes_per_input
    sources = collect_sources(source)
    frames = list(itertools.islice(
        iter_frames(sources, max_frames, lambda src, reason: None),
        batch_size))
    if not frames:
        raise ValueError(f'No readable image or video frame in {source}.')
    while len(frames) < batch_size:
        frames.append(frames[len(frames) % len(frames)])
    user_boxes = boxes_per_input(bboxes, len(sources))
    prepared = inferencer.preprocess(frames, user_boxes)
    dev = inferencer.device

    def inputs_of(ti, packed):
        return ti.model.data_preprocessor(pseudo_collate(packed),
                                          False)['inputs']

    dense = [(inferencer.task_inferencers[t], inputs_of(
        inferencer.task_inferencers[t], packed))
             for t, packed in prepared['dense'].items()]
    pose_inputs, sample_crops = [], 0
    if prepared['pose'] is not None:
        ti = inferencer.task_inferencers['pose']
        crops = prepared['pose']['packed']
        sample_crops = len(crops)
        # a flip test runs the model on the flipped crops too
        flips = (False, True) if (getattr(ti.model, 'test_cfg', None)
                                  or {}).get('flip_test') else (False, )
        for i in range(0, len(crops), batch_size):
            inputs = inputs_of(ti, crops[i:i + batch_size])
            pose_inputs += [(ti, inputs.flip(-1) if flip else inputs)
                            for flip in flips]

    def forwards(items):
        def run():
            with torch.inference_mode():
                for ti, inputs in items:
                    with ti.autocast():
                        ti.model(inputs, None, mode='tensor')
        return run

    def time_models(n):
        d = time_callable(forwards(dense), dev, warmup=0, repeats=n).times
        p = (time_callable(forwards(pose_inputs), dev, warmup=0,
                           repeats=n).times if pose_inputs else [0.0] * n)
        return d, p

    # Warm-up (allocations, torch.compile): the inferencer on the first
    # frames, writing to a folder of its own. Model-only runs are split
    # before and after the run so that both see the same (possibly
    # varying) machine load.
    with tempfile.TemporaryDirectory(prefix='sapiens_e2e_warmup_') as tmp:
        list(inferencer.stream(
            [f.image for f in frames[:max(1, warmup_images)]], out_dir=tmp,
            batch_size=batch_size, bboxes=user_boxes[frames[0].source.index],
            show_progress=False))
    before = max(1, repeats // 2)
    dense_t, pose_t = time_models(before)
    _sync(dev)
    start = time.perf_counter()
    n = people = 0
    for result in inferencer.stream(source, out_dir=out_dir,
                                    batch_size=batch_size, bboxes=bboxes,
                                    max_frames=max_frames,
                                    show_progress=False):
        n += 1
        if 'pose' in result['predictions']:
            people += len(result['predictions']['pose']['bboxes'])
    _sync(dev)
    e2e = time.perf_counter() - start
    d, p = time_models(max(1, repeats - before))
    dense_t, pose_t = dense_t + d, pose_t + p
    model_s = n / batch_size * statistics.median(dense_t)
    if sample_crops:
        model_s += people / sample_crops * statistics.median(pose_t)
    e2e_ips, model_ips = n / e2e, n / model_s
    return dict(images=n, e2e_s=e2e, e2e_images_per_s=e2e_ips,
                tasks=list(inferencer.tasks),
                crops_per_image=people / n if n else 0.0,
                model_latency=TimingStats([a + b for a, b in
                                           zip(dense_t, pose_t)]),
                model_s=model_s, model_batch_s=dict(
                    dense=statistics.median(dense_t),
                    pose=statistics.median(pose_t), crops=sample_crops),
                model_images_per_s=model_ips,
                ratio=e2e_ips / model_ips, batch_size=batch_size)


# ------------------------------------------------------------ report
def _fmt_s(s: float) -> str:
    return f'{s * 1e3:.1f} ms' if s < 1 else f'{s:.2f} s'


def _fmt_bytes(b: float) -> str:
    return f'{b / 2**20:.0f} MiB'


def format_report(result: dict) -> str:
    """Human-readable lines of a :func:`benchmark_model` result."""
    lat = result['latency']
    lines = [
        f"device {result['device']}"
        + (f" ({result['threads']} threads)" if result['threads'] else '')
        + f", dtype {result['dtype']} ({result['precision']}), batch "
        f"{result['batch_size']}, input {result['img_size'][0]}x"
        f"{result['img_size'][1]}, compile {result['compile']}",
        _fmt_options(result.get('options', {})),
        f"images/s            {result['images_per_s']:.4g}",
        f"latency (per batch) median {_fmt_s(lat.median)}, min "
        f"{_fmt_s(lat.min)}, max {_fmt_s(lat.max)}, IQR {_fmt_s(lat.iqr)} "
        f"({len(lat.times)} runs)",
        f"peak memory         {_fmt_bytes(result['peak_mem'])}"
        f" ({'' if result['mem_exact'] else 'process peak; '}"
        f"{_fmt_bytes(result['base_mem'])} before the timed runs)",
        f"FLOPs per batch     {result['flops']['total'] / 1e9:.4g} G "
        f"(matmul {result['flops']['matmul'] / 1e9:.4g} G, attention "
        f"{result['flops']['attention'] / 1e9:.4g} G)",
        f"achieved            {result['gflops_per_s']:.1f} GFLOP/s",
        f"limit               {_fmt_s(result['limit_s']['total'])} per batch "
        f"(matmul {_fmt_s(result['limit_s']['matmul'])}, attention "
        f"{_fmt_s(result['limit_s']['attention'])})",
        f"achieved/limit      {result['achieved_over_limit']:.3f}",
        'kernel rates (this run):',
    ]
    for item, (n, rate) in result['rates'].items():
        if item.kind == 'matmul':
            m, k, nn_ = item.shape
            desc = f'matmul {m}x{k} -> {nn_}'
        else:
            q_size, k_size = item.shape[0][0], item.shape[1][0]
            desc = 'attention ' + 'x'.join(map(str, q_size))
            if len(k_size) > 2 and k_size[-3] != q_size[-3]:
                desc += f' ({k_size[-3]} kv heads)'  # grouped-query
        lines.append(f'  {desc:<40} {str(item.dtype)[6:]:<9} x{n:<4} '
                     f'{rate / 1e9:8.1f} GFLOP/s')
    if result.get('peak_tflops') is not None or 'peak_fraction' in result:
        if result.get('peak_fraction') is not None:
            lines.append(
                f"device peak         {result['peak_tflops']:.4g} TFLOP/s; "
                f"achieved {100 * result['peak_fraction']:.1f} % of it")
        else:
            lines.append('GPU peak            unknown (pass --peak-tflops)')
    if 'eager_max_abs_diff' in result:
        lines.append(f"max abs difference to our eager output "
                     f"{result['eager_max_abs_diff']:.3g}")
    if 'stock_latency' in result:
        s = result['stock_latency']
        lines.append(
            f"{result.get('stock_label', 'stock mmpretrain'):<20}"
            f"median {_fmt_s(s.median)} (min "
            f"{_fmt_s(s.min)}, max {_fmt_s(s.max)}), peak memory "
            f"{_fmt_bytes(result['stock_peak_mem'])}; speed ratio "
            f"{result['stock_speedup']:.3f} (stock time / ours), max abs "
            f"output difference {result['stock_max_abs_diff']:.3g}")
    return '\n'.join(lines)


def _fmt_options(options: dict) -> str:
    return (f"options             compile mode "
            f"{options.get('compile_mode') or 'off'}, attention kernel "
            f"{options.get('sdpa', 'auto')}, CUDA graph "
            f"{'on' if options.get('cuda_graph') else 'off'}, channels-last "
            f"{'on' if options.get('channels_last') else 'off'}")


def format_end_to_end(result: dict) -> str:
    """Human-readable lines of an :func:`end_to_end` result."""
    lat = result['model_latency']
    lines = [
        f"end-to-end          {result['images']} images in "
        f"{_fmt_s(result['e2e_s'])}: {result['e2e_images_per_s']:.4g} "
        f"images/s (batch {result['batch_size']}; tasks "
        f"{', '.join(result.get('tasks', []))})",
    ]
    if 'pose' in result.get('tasks', []):
        lines.append(f"people per image    {result['crops_per_image']:.2f}")
    lines += [
        f"model only          {result['model_images_per_s']:.4g} images/s "
        f"(one batch: median {_fmt_s(lat.median)}, min {_fmt_s(lat.min)}, "
        f"max {_fmt_s(lat.max)})",
        f"end-to-end / model  {result['ratio']:.3f}",
    ]
    return '\n'.join(lines)


# ------------------------------------------------------------ decoding
def _peaked_heatmaps(n: int, k: int, h: int, w: int, sigma: float,
                     seed: int = 0):
    """(n, k, h, w) float32 heatmaps like a trained model's: one Gaussian
    peak of random height and place per map, a small negative bias and
    noise."""
    import numpy as np
    rng = np.random.default_rng(seed)
    out = np.empty((n, k, h, w), np.float32)
    for i in range(n):
        cx = rng.uniform(0, w - 1, (k, 1))
        cy = rng.uniform(0, h - 1, (k, 1))
        gx = np.exp(-(np.arange(w) - cx)**2 / (2 * sigma**2))
        gy = np.exp(-(np.arange(h) - cy)**2 / (2 * sigma**2))
        amp = rng.uniform(0.1, 1.0, (k, 1, 1))
        out[i] = amp * gy[:, :, None] * gx[:, None, :]
        out[i] += rng.normal(-0.01, 0.01, (k, h, w)).astype(np.float32)
    return out


def benchmark_decode(num_keypoints: Sequence[int] = (17, 133, 308),
                     heatmap_sizes: Sequence[Tuple[int, int]] = ((64, 48),
                                                                 (256, 192)),
                     people: int = 4,
                     devices: Sequence[str] = ('cpu', ),
                     warmup: int = 1,
                     repeats: int = 3) -> List[dict]:
    """Time heatmap-to-keypoint decoding: mmpose's ``UDPHeatmap.decode``
    (one person at a time) against
    :func:`sapiens_mm.codecs.decode_udp_heatmaps` (numpy, and torch on each
    of ``devices``), in the same run on the same heatmaps.

    Args:
        num_keypoints: Keypoint counts K to time.
        heatmap_sizes: (H, W) heatmap sizes; a model's input is 4x that
            (64x48 heatmaps for 256x192 crops, 256x192 for 1024x768).
        people: People decoded per call.
        devices: Devices of the torch path, e.g. ``('cpu', 'cuda')``.
        warmup: Untimed calls of each decoder.
        repeats: Timed calls (the median is reported).

    Returns:
        One dict per (size, K): ``heatmap_size``, ``num_keypoints``,
        ``people``, ``ms_per_person`` ({decoder: median ms}),
        ``min_ms_per_person`` (the fastest run: the least disturbed by other
        jobs), ``cpu_ms_per_person`` (median CPU time of the process, all
        threads: what the decoding costs when other jobs share the CPUs) and
        ``max_abs_diff_px`` ({decoder: largest keypoint difference from
        mmpose, input pixels}).
    """
    import numpy as np
    from mmpose.codecs import UDPHeatmap

    from sapiens_mm.codecs import decode_udp_heatmaps
    rows = []
    for h, w in heatmap_sizes:
        codec = UDPHeatmap(input_size=(4 * w, 4 * h), heatmap_size=(w, h),
                           sigma=2 if h <= 64 else 6)
        for k in num_keypoints:
            heatmaps = _peaked_heatmaps(people, k, h, w, codec.sigma)
            ref = np.concatenate([codec.decode(hm)[0] for hm in heatmaps])
            runs = {
                'mmpose': (lambda: [codec.decode(hm) for hm in heatmaps],
                           torch.device('cpu')),
                'numpy': (lambda: decode_udp_heatmaps(heatmaps,
                                                      codec.input_size),
                          torch.device('cpu')),
            }
            for dev in devices:
                dev = torch.device(dev)
                tensor = torch.from_numpy(heatmaps).to(dev)
                runs[f'torch-{dev.type}'] = (
                    lambda t=tensor: decode_udp_heatmaps(t, codec.input_size),
                    dev)
            diff = {}
            for name, (fn, dev) in runs.items():
                if name != 'mmpose':
                    kpts = fn()[0]
                    kpts = kpts.cpu().numpy() if torch.is_tensor(kpts) \
                        else kpts
                    diff[name] = float(np.abs(kpts - ref).max())
                time_callable(fn, dev, warmup, 0)
            # Round by round, so that load from other jobs hits all alike;
            # the process's CPU time too, which such load hardly changes.
            wall = {name: [] for name in runs}
            cpu = {name: [] for name in runs}
            for _ in range(repeats):
                for name, (fn, dev) in runs.items():
                    c0 = time.process_time()
                    wall[name] += time_callable(fn, dev, 0, 1).times
                    cpu[name].append(time.process_time() - c0)
            per_person = lambda t, f: {  # noqa: E731
                n: 1e3 * f(v) / people for n, v in t.items()}
            rows.append(dict(
                heatmap_size=[h, w], num_keypoints=k, people=people,
                ms_per_person=per_person(wall, statistics.median),
                min_ms_per_person=per_person(wall, min),
                cpu_ms_per_person=per_person(cpu, statistics.median),
                max_abs_diff_px=diff))
    return rows


def format_decode(rows: List[dict]) -> str:
    """Table of :func:`benchmark_decode` results."""
    names = list(rows[0]['ms_per_person']) if rows else []
    head = f'{"heatmaps":>9} {"K":>4} ' + ' '.join(
        f'{n + " ms":>24}' for n in names) + '  speed-up  max |diff| px'
    lines = ['ms per person, heatmap -> keypoints in input pixels: wall '
             'median (min) / CPU time median; speed-up of the fastest '
             'against mmpose in CPU time', head]
    for r in rows:
        ms, lo = r['ms_per_person'], r['min_ms_per_person']
        cpu = r['cpu_ms_per_person']
        fastest = min(v for n, v in cpu.items() if n != 'mmpose')
        size = 'x'.join(str(v) for v in r['heatmap_size'])
        lines.append(
            f'{size:>9} {r["num_keypoints"]:>4} ' + ' '.join(
                f'{f"{ms[n]:.2f} ({lo[n]:.2f}) / {cpu[n]:.2f}":>24}'
                for n in names) +
            f'  {cpu["mmpose"] / fastest:>7.0f}x  ' +
            f'{max(r["max_abs_diff_px"].values()):.1e}')
    return '\n'.join(lines)


def result_to_json(result: dict) -> dict:
    """A result of :func:`benchmark_model` or :func:`end_to_end` with plain
    JSON types (timings as median / min / max / iqr / times, kernel rates
    as a list of rows)."""
    out = {}
    for key, value in result.items():
        if isinstance(value, TimingStats):
            value = dict(median=value.median, min=value.min, max=value.max,
                         iqr=value.iqr, times=value.times)
        elif key == 'rates':
            value = [
                dict(kind=it.kind,
                     shape=it.shape if it.kind == 'matmul' else
                     [list(s[0]) for s in it.shape],
                     dtype=str(it.dtype), flops=it.flops, calls=n,
                     flops_per_s=rate) for it, (n, rate) in value.items()
            ]
        out[key] = value
    return out
