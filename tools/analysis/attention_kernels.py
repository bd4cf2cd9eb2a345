"""Attention kernels against the GEMM rate on one Sapiens layer's shapes.

    python tools/analysis/attention_kernels.py                  # 0.3b, bf16
    python tools/analysis/attention_kernels.py --dtype fp32 --rounds 7
    python tools/analysis/attention_kernels.py --kv-heads 8     # Sapiens2 GQA
    python tools/analysis/attention_kernels.py --with-compile   # + Inductor
    python tools/analysis/attention_kernels.py --pinned-pair    # 2 processes

Times, in interleaved rounds (one timing of each candidate per round, so
that load from other jobs hits all alike), the GEMMs of one encoder layer
(its qkv / proj / FFN shapes through the linear layers the models run,
:class:`sapiens_mm.utils.cpu_linear.PackedCpuLinear`: the GEMM rate) and
each attention route on (batch, heads, tokens, head size): PyTorch's
``F.scaled_dot_product_attention``, a batched ``q @ k^T`` alone, the
package's bf16 or float32 CPU kernel
(:func:`sapiens_mm.utils.sdpa.cpu_attention`) and, with ``--with-compile``, Inductor's CPU flex-attention template
(``torch.compile(flex_attention)``) and ``torch.compile`` of SDPA with
``max-autotune``. Prints each route's GFLOP/s (median and best round), its
ratio to the GEMM rate, and its largest difference from a float64
reference. ``malloc`` keeps freed memory as in CPU inference
(:func:`sapiens_mm.utils.cpu_allocator.keep_freed_memory`, set by this
tool as the command line and the benchmark set it): each call's output and scratch buffers
reuse memory instead of faulting fresh pages in, as they do in the models.

``--pinned-pair`` measures instead how the attention kernel shares the
machine: in interleaved rounds, one process pinned to one core (``taskset
-c``) alone, then two processes pinned to two cores at once, each calling
the kernel (the package's CPU kernel where it runs, else PyTorch's) for
``--min-time`` seconds after a common start. It prints each process's
rate, its thread count (PyTorch's, which follows the affinity) and the
ratio of the pair's mean rate to the lone process's: a kernel whose
threads follow ``torch.get_num_threads()`` and the process's CPU affinity,
with no threads of its own, keeps it near 1 (target >= 0.9).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from sapiens_mm.utils.cpu_allocator import keep_freed_memory
from sapiens_mm.utils.cpu_linear import pack_cpu_linears
from sapiens_mm.utils.sdpa import (
    cpu_attention,
    cpu_attention_available,
    sdpa_backend,
)

DTYPES = dict(bf16=torch.bfloat16, fp32=torch.float32)
GEMMS = 'GEMMs of the layer (packed linear)'


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[2],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('--dtype', choices=sorted(DTYPES), default='bf16')
    p.add_argument('--tokens', type=int, default=3072,
                   help='sequence length (default: 3072, 1024x768 input)')
    p.add_argument('--heads', type=int, default=16)
    p.add_argument('--kv-heads', type=int, default=None,
                   help='K/V heads (grouped-query attention; default: '
                   '--heads)')
    p.add_argument('--head-dims', type=int, default=64)
    p.add_argument('--ffn', type=int, default=4096,
                   help='FFN hidden size of the layer (default: 4096)')
    p.add_argument('--rounds', type=int, default=5)
    p.add_argument('--min-time', type=float, default=0.5,
                   help='seconds each candidate runs per round')
    p.add_argument('--threads', type=int, default=None)
    p.add_argument('--with-compile', action='store_true',
                   help='also Inductor routes (compiles first: ~1 min)')
    p.add_argument('--pinned-pair', action='store_true',
                   help='instead: the attention kernel\'s rate in two '
                   'processes pinned to one core each (taskset -c) against '
                   'one such process alone; prints the ratio (target >= '
                   '0.9)')
    p.add_argument('--cpus', default=None,
                   help='--pinned-pair: the two CPUs, e.g. 0,1 (default: '
                   'the first two this process may run on)')
    p.add_argument('--pinned-child', action='store_true',
                   help=argparse.SUPPRESS)  # one process of --pinned-pair
    return p


def timed(fn, min_time: float) -> float:
    """Seconds per call: repeats of ``fn`` for at least ``min_time``."""
    n, start = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return elapsed / n


def attention_inputs(args, dtype):
    """Unit-normal q, k, v of the requested sizes (seeded)."""
    n, h, d = args.tokens, args.heads, args.head_dims
    kvh = args.kv_heads or h
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, h, n, d, generator=gen).to(dtype)
    k = torch.randn(1, kvh, n, d, generator=gen).to(dtype)
    v = torch.randn(1, kvh, n, d, generator=gen).to(dtype)
    return q, k, v


def attention_route(args, dtype):
    """``(name, fn of q, k, v)``: the package's CPU kernel where it runs
    these sizes, else PyTorch's SDPA."""
    if args.head_dims == 64 and cpu_attention_available(dtype):
        return f'{args.dtype} CPU kernel (sapiens_mm)', cpu_attention
    gqa = (args.kv_heads or args.heads) != args.heads
    return 'F.scaled_dot_product_attention', (
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v,
                                                       enable_gqa=gqa))


def pinned_child(args) -> int:
    """One process of ``--pinned-pair``: warms up, prints ``ready``, waits
    for a line on stdin, then prints ``rate <calls/s> <threads>`` (other
    lines, e.g. the log, are ignored by the parent)."""
    keep_freed_memory()
    dtype = DTYPES[args.dtype]
    q, k, v = attention_inputs(args, dtype)
    _, fn = attention_route(args, dtype)
    with torch.inference_mode():
        fn(q, k, v)
        print('ready', flush=True)
        sys.stdin.readline()
        seconds = timed(lambda: fn(q, k, v), args.min_time)
    print(f'rate {1.0 / seconds} {torch.get_num_threads()}', flush=True)
    return 0


def run_pinned(args, cpus) -> list:
    """Start one child per CPU of ``cpus`` (each pinned to it), start them
    together, and return their ``(calls/s, threads)``."""
    argv = [sys.executable, os.path.abspath(__file__), '--pinned-child',
            '--dtype', args.dtype, '--tokens', str(args.tokens), '--heads',
            str(args.heads), '--head-dims', str(args.head_dims),
            '--min-time', str(args.min_time)]
    if args.kv_heads:
        argv += ['--kv-heads', str(args.kv_heads)]
    env = {k: v for k, v in os.environ.items()
           if k not in ('OMP_NUM_THREADS', 'MKL_NUM_THREADS')}
    taskset = shutil.which('taskset')
    procs = []
    for cpu in cpus:
        if taskset:
            cmd, pre = [taskset, '-c', str(cpu)] + argv, None
        else:
            cmd, pre = argv, (lambda c=cpu: os.sched_setaffinity(0, {c}))
        procs.append(subprocess.Popen(cmd, stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True,
                                      env=env, preexec_fn=pre))
    try:
        for proc in procs:
            _tagged_line(proc, 'ready')
        for proc in procs:
            proc.stdin.write('go\n')
            proc.stdin.flush()
        results = []
        for proc in procs:
            rate, threads = _tagged_line(proc, 'rate')
            results.append((float(rate), int(threads)))
            if proc.wait(timeout=60):
                raise RuntimeError('a pinned process failed')
        return results
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _tagged_line(proc, tag: str) -> list:
    """The words after ``tag`` of the next line of ``proc``'s output that
    starts with it."""
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f'a pinned process ended before {tag!r}')
        words = line.split()
        if words and words[0] == tag:
            return words[1:]


def pinned_pair(args) -> int:
    """``--pinned-pair``: see the module docstring."""
    if args.cpus:
        cpus = [int(c) for c in args.cpus.split(',')]
    else:
        cpus = sorted(os.sched_getaffinity(0))[:2]
    if len(cpus) != 2:
        print('--pinned-pair needs two CPUs (this process may run on '
              f'{sorted(os.sched_getaffinity(0))})', file=sys.stderr)
        return 2
    name, _ = attention_route(args, DTYPES[args.dtype])
    print(f'{name}; {args.heads} heads ({args.kv_heads or args.heads} K/V) '
          f'x {args.tokens} tokens x {args.head_dims}; CPUs {cpus[0]} and '
          f'{cpus[1]}; {args.rounds} rounds of >= {args.min_time} s')
    print(f'{"round":>5} {"alone calls/s":>14} {"pair calls/s":>22} '
          f'{"threads":>8} {"pair / alone":>13}')
    ratios = []
    for r in range(args.rounds):
        (alone, threads), = run_pinned(args, cpus[:1])
        pair = run_pinned(args, cpus)
        mean = statistics.mean(rate for rate, _ in pair)
        ratios.append(mean / alone)
        counts = '/'.join(str(t) for t in [threads] + [t for _, t in pair])
        print(f'{r + 1:>5} {alone:>14.2f} {pair[0][0]:>10.2f} '
              f'{pair[1][0]:>11.2f} {counts:>8} {ratios[-1]:>13.2f}')
    print(f'pair / alone: median {statistics.median(ratios):.2f}, min '
          f'{min(ratios):.2f} (target >= 0.9)')
    return 0


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.pinned_child:
        return pinned_child(args)
    if args.pinned_pair:
        return pinned_pair(args)
    keep_freed_memory()
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = DTYPES[args.dtype]
    n, h, d = args.tokens, args.heads, args.head_dims
    kvh = args.kv_heads or h
    c = h * d
    q, k, v = attention_inputs(args, dtype)
    gen = torch.Generator().manual_seed(1)
    gqa = kvh != h
    att_flops = 4 * h * n * n * d
    gemms = [(n, c, c + 2 * kvh * d), (n, c, c), (n, c, args.ffn),
             (n, args.ffn, c)]
    gemm_inputs = [(torch.randn(m, kk, generator=gen).to(dtype),
                    nn.Linear(kk, nn_, bias=False, dtype=dtype))
                   for m, kk, nn_ in gemms]
    for _, layer in gemm_inputs:
        pack_cpu_linears(layer)
    gemm_flops = sum(2 * m * kk * nn_ for m, kk, nn_ in gemms)

    def layer_gemms():
        with torch.inference_mode():
            for x, layer in gemm_inputs:
                layer(x)

    cands = {
        GEMMS: (layer_gemms, gemm_flops),
        'F.scaled_dot_product_attention': (
            lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa),
            att_flops),
        'q @ k^T alone (half the FLOPs)': (
            lambda: q @ k.repeat_interleave(h // kvh, 1).transpose(-1, -2),
            att_flops // 2),
    }
    kernel, fn = attention_route(args, dtype)
    if fn is cpu_attention:
        cands[kernel] = (lambda: cpu_attention(q, k, v), att_flops)
    else:
        print(f'{args.dtype} CPU kernel: not available on this machine '
              '(AVX512_BF16 / C compiler / head size 64)')
    if args.with_compile:
        from torch.nn.attention.flex_attention import flex_attention
        flex = torch.compile(flex_attention)
        sdpa_at = torch.compile(
            lambda a, b, cc: F.scaled_dot_product_attention(
                a, b, cc, enable_gqa=gqa), mode='max-autotune')
        t0 = time.perf_counter()
        with torch.inference_mode():
            flex(q, k, v, enable_gqa=gqa)
            sdpa_at(q, k, v)
        print(f'compiled in {time.perf_counter() - t0:.0f} s')
        cands['Inductor flex_attention (CPU template)'] = (
            lambda: flex(q, k, v, enable_gqa=gqa), att_flops)
        cands['torch.compile(SDPA, max-autotune)'] = (
            lambda: sdpa_at(q, k, v), att_flops)

    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                         enable_gqa=gqa)
    rates = {name: [] for name in cands}
    with torch.inference_mode(), sdpa_backend('torch', 'cpu'):
        errors = {}
        for name, (fn, _) in cands.items():
            out = fn()
            if name not in (GEMMS, 'q @ k^T alone (half the FLOPs)'):
                errors[name] = float((out.double() - ref).abs().max())
        for r in range(args.rounds):
            order = list(cands)
            order = order[r % len(order):] + order[:r % len(order)]
            for name in order:
                fn, flops = cands[name]
                rates[name].append(flops / timed(fn, args.min_time))
    gemm = rates[GEMMS]
    print(f'{args.dtype}, {torch.get_num_threads()} threads, {h} heads '
          f'({kvh} K/V) x {n} tokens x {d}; {args.rounds} interleaved rounds'
          f' of >= {args.min_time} s each')
    print(f'{"route":<40} {"GFLOP/s median (best)":>22} '
          f'{"/ GEMM rate median (best)":>26} {"max |err|":>10}')
    for name, rs in rates.items():
        # The ratio of each round to the same round's GEMM rate: both felt
        # the same load.
        ratio = [a / b for a, b in zip(rs, gemm)]
        err = errors.get(name)
        print(f'{name:<40} {statistics.median(rs) / 1e9:>12.0f} '
              f'({max(rs) / 1e9:>6.0f}) {statistics.median(ratio):>16.2f} '
              f'({max(ratio):.2f}) '
              + (f'{err:>10.2e}' if err is not None else f'{"":>10}'))
    spread = max(gemm) / min(gemm)
    if spread > 1.2:
        print(f'WARNING: the GEMM rate spread {100 * (spread - 1):.0f} % '
              'over the rounds: other load on the machine; the ratios '
              '(each against its own round) are the figures to trust')
    return 0


if __name__ == '__main__':
    sys.exit(main())
