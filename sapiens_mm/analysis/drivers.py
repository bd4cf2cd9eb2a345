"""The benchmark runs: one model against its limit (and against other
implementations of the same model), and the inferencer end to end against
its model-only time.

Every comparison is measured in rounds that interleave the things compared
(the order alternating from round to round), so that load from other jobs
on the machine hits them alike; each result carries medians, the min-based
figures beside them (the least disturbed runs) and warnings when repeats
spread more than 20 % or the model beats its own limit.
"""
import contextlib
import copy
import itertools
import statistics
import tempfile
import time
from typing import Callable, Dict, List, Literal, Optional, Sequence, Tuple

import torch
import torch.nn as nn

from sapiens_mm.apis.inference import check_batch_size, optimize_for_inference
from sapiens_mm.tasks import DTYPES
from sapiens_mm.utils.cpu_linear import PackedParameter, packed_weight_bytes
from sapiens_mm.utils.sdpa import resolve_sdpa_backend, sdpa_backend

from .builders import build_stock_backbone, first_tensor, tensor_forward
from .flops import WorkItem, count_work
from .limit import (
    gemm_limit_seconds,
    gemm_rate,
    gpu_peak_tflops,
    kernel_calls,
    limit_seconds,
    limit_warnings,
)
from .timing import PeakMemory, TimingStats, sync, time_callable

__all__ = ['BENCHMARK_DTYPES', 'COMPILE_MODES', 'Precision',
           'benchmark_model', 'end_to_end', 'weight_bytes']

#: Compute dtypes :func:`benchmark_model` times.
BENCHMARK_DTYPES = ('fp32', 'bf16', 'fp16')
Precision = Literal['cast', 'autocast']
#: ``torch.compile`` modes :func:`benchmark_model` accepts.
COMPILE_MODES = ('default', 'reduce-overhead', 'max-autotune',
                 'max-autotune-no-cudagraphs')


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


def weight_bytes(model: nn.Module) -> Dict[str, int]:
    """Bytes of ``model``'s weights as it holds them: ``total``, of which
    ``packed`` are linear weights in their inference form (packed in their
    compute dtype) and ``other`` every other parameter and buffer (a
    tensor shared by several modules counted once)."""
    seen, other = set(), 0
    for t in itertools.chain(model.parameters(), model.buffers()):
        if isinstance(t, PackedParameter) or id(t) in seen:
            continue
        seen.add(id(t))
        other += t.numel() * t.element_size()
    packed = packed_weight_bytes(model)
    return dict(total=packed + other, packed=packed, other=other)


def _with_sdpa(fn: Callable[[], object], backend: str,
               device: torch.device) -> Callable[[], object]:
    """``fn`` run under :func:`sapiens_mm.utils.sdpa.sdpa_backend`."""
    if backend == 'auto':
        return fn

    def run():
        with sdpa_backend(backend, device):
            return fn()
    return run


def _check_arguments(dtype, precision, batch_size, img_size, repeats, warmup,
                     compile_mode, device, cuda_graph) -> torch.device:
    if dtype not in BENCHMARK_DTYPES:
        raise ValueError(f'dtype must be one of {list(BENCHMARK_DTYPES)}, '
                         f'got {dtype!r}.')
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
    dev = torch.device(device)
    if dev.type == 'cuda' and not torch.cuda.is_available():
        raise RuntimeError(f'device={device!r} but CUDA is not available.')
    if cuda_graph and dev.type != 'cuda':
        raise ValueError(f'cuda_graph needs a CUDA device, got {device!r}; '
                         'leave it off on CPU.')
    return dev


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
                    compare_with: Optional[Dict[str, nn.Module]] = None,
                    rate_min_time: float = 0.1,
                    peak_tflops: Optional[float] = None,
                    seed: int = 0,
                    compile_mode: Optional[str] = None,
                    sdpa: str = 'auto',
                    cuda_graph: bool = False,
                    channels_last: bool = False,
                    breakdown: bool = False,
                    optimized: Sequence[str] = ()) -> dict:
    """Time a model, compute its limit and compare it with other models.

    Each of ``repeats`` rounds times our model once, each comparison model
    once (which model goes first rotates from round to round) and each of
    the model's distinct kernel calls
    (:func:`~sapiens_mm.analysis.limit.kernel_calls`) for
    ``rate_min_time`` seconds.

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
        repeats: Rounds.
        compile: ``torch.compile`` the backbone (in place) before timing.
        compare_stock: Also time the comparison backbone of
            :func:`~sapiens_mm.analysis.builders.build_stock_backbone`
            (mmpretrain's ``VisionTransformer`` for Sapiens, the plain-
            PyTorch reference for Sapiens2) with the same arch and weights
            (the backbone, or the task model with its backbone swapped).
        compare_with: More models to time on the same input, by label
            (e.g. Transformers' Sapiens2 from
            :func:`~sapiens_mm.analysis.builders.build_transformers_sapiens2`);
            each is called on the input tensor and its first output tensor
            is compared with ours when the shapes match.
        rate_min_time: Seconds each kernel is timed for in each round.
        peak_tflops: The device's peak in TFLOP/s for the chosen dtype;
            on a GPU it defaults to
            :data:`~sapiens_mm.analysis.limit.KNOWN_GPU_PEAK_TFLOPS`.
        seed: Seed of the random input.
        compile_mode: ``torch.compile`` mode (:data:`COMPILE_MODES`);
            implies ``compile``.
        sdpa: Attention kernel of our model and of the attention timings
            (:func:`sapiens_mm.utils.sdpa.sdpa_backend`).
        cuda_graph: Capture our forward pass as one CUDA graph and time its
            replays (CUDA only).
        channels_last: Channels-last 4-D weights for our model.
        breakdown: After the rounds, one more pass of our model with each
            GEMM-like call, attention call and norm timed where the model
            makes it (:func:`~sapiens_mm.analysis.flops.count_work` with a
            device): where the time goes against the limit's parts. Eager
            models only (not with ``compile`` or ``cuda_graph``).
        optimized: Labels of ``compare_with`` that are our model built
            another way (e.g. through the registry,
            :func:`~sapiens_mm.analysis.builders.build_registry_route`):
            prepared as ours, and every other comparison is also reported
            against each of them.

    Our model runs as the inferencers run it: eval mode and, without
    ``compile``, its CPU linear layers in their inference form in the
    timed precision (:func:`~sapiens_mm.apis.optimize_for_inference`).
    Comparison models run as built (eager, PyTorch's attention choice,
    contiguous weights), so their speed-ups measure our options too.

    Returns:
        dict: ``latency`` (:class:`TimingStats`, seconds per batch),
        ``images_per_s``, ``flops`` (per batch: total / ``matmul`` /
        ``attention``), ``gflops_per_s``; ``limit_s`` (``total``: matmul at
        the rates of its shapes, attention at the pass's GEMM rate;
        ``matmul``, ``attention`` its parts; ``kernels``: every call at its
        own kernel's rate), ``limit_min_s`` (the same from each kernel's
        fastest timing), ``gemm_rate`` / ``attention_rate`` (FLOP/s, median
        timings), ``achieved_over_limit`` (median limit / median latency)
        and ``achieved_over_limit_min`` (min-based), ``round_limit``
        (:class:`TimingStats` of the limit computed from each round's kernel
        timings alone), ``rates`` ({:class:`WorkItem`: (calls, FLOP/s)}),
        ``warnings`` (sentences), ``peak_mem`` / ``base_mem`` (bytes),
        ``peak_tflops`` / ``peak_fraction`` (GPU), ``options``,
        ``eager_max_abs_diff`` (compiled / graphed against eager) and
        ``comparisons`` ({label: ``latency``, ``speedup`` (their median /
        ours), ``min_speedup`` (their min / our min), ``peak_mem``,
        ``max_abs_diff``, the largest absolute difference of the first
        output tensor, or None when the shapes differ, ``speedup_vs``
        ({label of ``optimized``: ``speedup`` / ``min_speedup`` against
        that model instead of ours})}), ``weights`` (bytes of our model's
        weights as held: :func:`weight_bytes`); with ``breakdown``
        also ``breakdown`` (seconds of the timed pass: ``total``,
        ``matmul``, ``attention``, ``norm`` and ``other``, the rest).

    Raises:
        ValueError: Bad ``dtype``, ``precision``, ``batch_size``, sizes,
            ``compile_mode`` or ``sdpa``, ``cuda_graph`` off CUDA, or
            ``breakdown`` with ``compile`` / ``cuda_graph``.
    """
    dev = _check_arguments(dtype, precision, batch_size, img_size, repeats,
                           warmup, compile_mode, device, cuda_graph)
    compile = compile or compile_mode is not None
    if breakdown and (compile or cuda_graph):
        raise ValueError(
            'breakdown times each call of the eager model: run it without '
            'compile / cuda_graph (a compiled or graphed pass has no '
            'per-call boundaries to time)')
    sdpa = resolve_sdpa_backend(sdpa, dev)
    torch_dtype = DTYPES[dtype]
    others: Dict[str, nn.Module] = {}
    if compare_stock:
        backbone = getattr(model, 'backbone', model)
        stock_backbone = build_stock_backbone(backbone)
        label = ('plain reference' if type(stock_backbone).__name__
                 == 'Sapiens2Reference' else 'stock mmpretrain')
        if backbone is model:
            others[label] = stock_backbone
        else:
            others[label] = copy.deepcopy(model)
            others[label].backbone = stock_backbone
    others.update(compare_with or {})
    model = _prepare(model, dev, torch_dtype, precision)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    if not compile:  # torch.compile traces the plain layers
        optimize_for_inference(model, torch_dtype)
    in_dtype = torch_dtype if precision == 'cast' else torch.float32
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch_size, 3, *img_size, generator=gen).to(
        device=dev, dtype=in_dtype)

    def runner(m, backend='auto'):
        fwd = tensor_forward(m)

        def forward(inputs):
            with torch.inference_mode(), _precision_ctx(
                    dev, torch_dtype, precision), sdpa_backend(backend, dev):
                return fwd(inputs)
        return forward

    # The counting pass is also the first warm-up pass and gives the output.
    forward = runner(model, sdpa)
    outs = []
    work = count_work(model, lambda: outs.append(forward(x)))
    out = first_tensor(outs.pop()).float()
    if compile:  # in place: keeps the tensor-mode forward / ``backbone``
        getattr(model, 'backbone', model).compile(
            **({} if compile_mode in (None, 'default') else
               dict(mode=compile_mode)))
    kernels = {
        it: _with_sdpa(fn, sdpa, dev) if it.kind == 'attention' else fn
        for it, fn in kernel_calls(work, dev).items()
    }
    for _ in range(warmup if compile else max(0, warmup - 1)):
        forward(x)
    if cuda_graph:  # captured after the warm-up (compilation included)
        from sapiens_mm.utils.cuda_graph_forward import CUDAGraphForward
        graphed = CUDAGraphForward(forward, x, warmup=1)
        ours = lambda: graphed(x)  # noqa: E731
    else:
        ours = lambda: forward(x)  # noqa: E731
    runs = {None: ours}  # None: our model
    for label, other in others.items():
        other = _prepare(other, dev, torch_dtype, precision)
        if label in optimized:
            optimize_for_inference(other, torch_dtype)
        fwd = runner(other)
        runs[label] = lambda fwd=fwd: fwd(x)
        for _ in range(warmup):
            fwd(x)
    for fn in kernels.values():
        fn()
    sync(dev)
    times = {label: [] for label in runs}
    peaks = {label: 0 for label in runs}
    last = {}
    kernel_times: Dict[WorkItem, List[float]] = {it: [] for it in kernels}
    base, exact = 0, True
    order = list(runs)
    for i in range(repeats):
        for label in order[i % len(order):] + order[:i % len(order)]:
            with PeakMemory(dev) as mem:
                start = time.perf_counter()
                result = runs[label]()
                sync(dev)
                times[label].append(time.perf_counter() - start)
            if i == repeats - 1:
                last[label] = first_tensor(result).float().clone()
            peaks[label] = max(peaks[label], mem.peak)
            if label is None:
                base, exact = max(base, mem.base), exact and mem.exact
        for it, fn in kernels.items():
            kernel_times[it].append(
                time_callable(fn, dev, warmup=0, repeats=1,
                              min_time=rate_min_time).median)
    split = None
    if breakdown:
        start = time.perf_counter()
        timed = count_work(model, ours, device=dev)
        total = time.perf_counter() - start
        split = dict(total=total, **{
            kind: timed.seconds.get(kind, 0.0)
            for kind in ('matmul', 'attention', 'norm')})
        split['other'] = total - sum(timed.seconds.values())
    stats = TimingStats(times[None])
    final = last[None]
    rates = {it: it.flops / statistics.median(ts)
             for it, ts in kernel_times.items()}
    best = {it: it.flops / min(ts) for it, ts in kernel_times.items()}
    per_round = TimingStats([
        gemm_limit_seconds(work, {it: it.flops / ts[i]
                                  for it, ts in kernel_times.items()})
        for i in range(repeats)])
    flops = work.flops()
    limit = gemm_limit_seconds(work, rates)
    limit_min = gemm_limit_seconds(work, best)
    attention_s = limit_seconds(work, rates, 'attention')
    result = dict(
        batch_size=batch_size, img_size=tuple(img_size), dtype=dtype,
        precision=precision, device=str(dev), compile=compile,
        threads=torch.get_num_threads() if dev.type == 'cpu' else None,
        latency=stats, images_per_s=batch_size / stats.median,
        flops=dict(total=flops, matmul=work.flops('matmul'),
                   attention=work.flops('attention')),
        gflops_per_s=flops / stats.median / 1e9,
        limit_s=dict(total=limit,
                     matmul=limit_seconds(work, rates, 'matmul'),
                     attention=limit - limit_seconds(work, rates, 'matmul'),
                     kernels=limit_seconds(work, rates)),
        limit_min_s=limit_min,
        gemm_rate=gemm_rate(work, rates),
        attention_rate=(work.flops('attention') / attention_s
                        if attention_s else None),
        achieved_over_limit=limit / stats.median,
        achieved_over_limit_min=limit_min / stats.min,
        round_limit=per_round,
        rates={it: (n, rates[it]) for it, n in work.items.items()},
        peak_mem=peaks[None], base_mem=base, mem_exact=exact,
        weights=weight_bytes(model),
        options=dict(compile_mode=(compile_mode or 'default') if compile
                     else None, sdpa=sdpa, cuda_graph=cuda_graph,
                     channels_last=channels_last))
    if split is not None:
        result['breakdown'] = split
    if compile or cuda_graph:
        result['eager_max_abs_diff'] = float((final - out).abs().max())
    if dev.type == 'cuda' or peak_tflops:
        peak_t = peak_tflops or gpu_peak_tflops(dev)
        result['peak_tflops'] = peak_t
        result['peak_fraction'] = (flops / stats.median / 1e12 / peak_t
                                   if peak_t else None)
    result['comparisons'] = {}
    for label in others:
        other = TimingStats(times[label])
        theirs = last[label]
        result['comparisons'][label] = dict(
            latency=other, speedup=other.median / stats.median,
            min_speedup=other.min / stats.min, peak_mem=peaks[label],
            max_abs_diff=float((final - theirs).abs().max())
            if theirs.shape == final.shape else None)
    for label, c in result['comparisons'].items():
        c['speedup_vs'] = {
            route: dict(speedup=c['latency'].median /
                        result['comparisons'][route]['latency'].median,
                        min_speedup=c['latency'].min /
                        result['comparisons'][route]['latency'].min)
            for route in optimized if route != label}
    spreads = {'model latency': stats.spread,
               'limit from each round\'s kernel timings': per_round.spread}
    spreads.update({f'{label} latency': c['latency'].spread
                    for label, c in result['comparisons'].items()})
    result['warnings'] = limit_warnings(result['achieved_over_limit'],
                                        spreads)
    return result


def end_to_end(inferencer, source: str, out_dir: str,
               batch_size: int = 1, warmup_images: int = 1,
               repeats: int = 3, bboxes=None,
               max_frames: Optional[int] = None) -> dict:
    """Throughput of a :class:`SapiensInferencer` on a folder of images or
    a video, against the model-only throughput of its task models on the
    same work.

    End to end is the inferencer's ``stream`` over the whole ``source``
    (decoding, person detection, pre-processing, models, post-processing,
    writing to ``out_dir``). Model-only is each task inferencer's model
    step (``forward_batches``: data pre-processor, network, flip test when
    the config has one, the head's decoding) on the first ``batch_size``
    frames, pre-processed by the task inferencers' own ``preprocess_images``
    (for pose: the frames' person crops, in chunks of ``batch_size``). The
    run's model-only time is ``frames / batch_size`` dense passes plus
    ``people / sample crops`` pose passes, ``people`` being the number the
    run found (the detector's count varies from frame to frame).

    After a warm-up (the inferencer on the first ``warmup_images`` frames,
    one model-only pass), ``repeats`` rounds each run the model-only
    measurement and the whole source end to end, the order alternating.

    Args:
        inferencer: The :class:`SapiensInferencer` to time.
        source: A folder of images or a video file.
        out_dir: Where the inferencer writes (each round rewrites it).
        batch_size: Frames (dense tasks) / crops (pose) per forward pass.
        warmup_images: Frames of the warm-up run.
        repeats: Rounds.
        bboxes: Person boxes for pose, as ``SapiensInferencer.stream``
            takes them (one N x 4 array for every frame, or one per input);
            None: the inferencer's detector.
        max_frames: Read at most this many frames of a video.

    Returns:
        dict: ``images`` (frames), ``e2e`` (:class:`TimingStats` of the
        whole runs), ``e2e_s`` (its median), ``e2e_images_per_s``,
        ``tasks``, ``crops_per_image`` (people per frame in the run),
        ``model_latency`` (:class:`TimingStats` of the model-only passes of
        one sample batch: dense + pose), ``model_batch_s`` (median seconds
        of its dense and pose passes and its number of crops), ``model_s``
        (the run's model-only time, medians), ``model_images_per_s``,
        ``ratio`` (end-to-end / model-only throughput from medians),
        ``ratio_min`` (from each side's fastest round) and ``warnings``.

    Raises:
        ValueError: The source has no image or frame.
    """
    from sapiens_mm.apis.inferencers.utils import collect_sources, iter_frames
    from sapiens_mm.detection import boxes_per_input
    check_batch_size(batch_size)
    sources = collect_sources(source)
    frames = list(itertools.islice(
        iter_frames(sources, max_frames, lambda src, reason: None),
        batch_size))
    if not frames:
        raise ValueError(f'No readable image or video frame in {source}.')
    while len(frames) < batch_size:
        frames.append(frames[len(frames) % len(frames)])
    images = [f.image for f in frames]
    user_boxes = boxes_per_input(bboxes, len(sources))
    dense, pose, crops = [], None, 0
    for task, ti in inferencer.task_inferencers.items():
        if task == 'pose':
            prepared = ti.preprocess_images(
                images, [f.source.name for f in frames],
                [user_boxes[f.source.index] for f in frames])
            pose, crops = (ti, prepared['packed']), len(prepared['packed'])
        else:
            dense.append((ti, ti.preprocess_images(images)))
    dev = torch.device(inferencer.device)

    def model_only() -> Tuple[float, float]:
        sync(dev)
        start = time.perf_counter()
        for ti, packed in dense:
            ti.forward_batches(packed, batch_size)
        sync(dev)
        mid = time.perf_counter()
        if pose is not None and crops:
            pose[0].forward_batches(pose[1], batch_size)
        sync(dev)
        return mid - start, time.perf_counter() - mid

    def run_all() -> Tuple[int, int]:
        n = people = 0
        for result in inferencer.stream(source, out_dir=out_dir,
                                        batch_size=batch_size, bboxes=bboxes,
                                        max_frames=max_frames,
                                        show_progress=False):
            n += 1
            if 'pose' in result['predictions']:
                people += len(result['predictions']['pose']['bboxes'])
        return n, people

    with tempfile.TemporaryDirectory(prefix='sapiens_e2e_warmup_') as tmp:
        list(inferencer.stream(
            images[:max(1, warmup_images)], out_dir=tmp,
            batch_size=batch_size, bboxes=user_boxes[frames[0].source.index],
            show_progress=False))
    model_only()
    dense_t, pose_t, e2e_t = [], [], []
    n = people = 0
    for i in range(repeats):
        for step in ('model', 'e2e') if i % 2 == 0 else ('e2e', 'model'):
            if step == 'model':
                d, p = model_only()
                dense_t.append(d)
                pose_t.append(p)
            else:
                sync(dev)
                start = time.perf_counter()
                n, people = run_all()
                sync(dev)
                e2e_t.append(time.perf_counter() - start)

    def model_seconds(d: float, p: float) -> float:
        return n / batch_size * d + (people / crops * p if crops else 0.0)

    e2e, model = TimingStats(e2e_t), TimingStats(
        [a + b for a, b in zip(dense_t, pose_t)])
    model_s = model_seconds(statistics.median(dense_t),
                            statistics.median(pose_t))
    model_min = min(model_seconds(d, p) for d, p in zip(dense_t, pose_t))
    warnings = limit_warnings(0.0, {'end-to-end runs': e2e.spread,
                                    'model-only passes': model.spread})
    ratio = model_s / e2e.median if e2e.median else 0.0
    if ratio > 1:
        warnings.append(f'end-to-end / model {ratio:.3f} > 1: the whole '
                        'run was faster than its models alone, so load on '
                        'the machine disturbed the timings')
    return dict(images=n, e2e=e2e, e2e_s=e2e.median,
                e2e_images_per_s=n / e2e.median,
                tasks=list(inferencer.tasks),
                crops_per_image=people / n if n else 0.0,
                model_latency=model, model_s=model_s,
                model_batch_s=dict(dense=statistics.median(dense_t),
                                   pose=statistics.median(pose_t),
                                   crops=crops),
                model_images_per_s=n / model_s if model_s else float('inf'),
                ratio=ratio, ratio_min=model_min / e2e.min,
                batch_size=batch_size, warnings=warnings)
