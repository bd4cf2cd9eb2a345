"""Attention kernels against the GEMM rate on one Sapiens layer's shapes.

    python tools/analysis/attention_kernels.py                  # 0.3b, bf16
    python tools/analysis/attention_kernels.py --dtype fp32 --rounds 7
    python tools/analysis/attention_kernels.py --kv-heads 8     # Sapiens2 GQA
    python tools/analysis/attention_kernels.py --with-compile   # + Inductor

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
(:func:`sapiens_mm.utils.cpu_allocator.keep_freed_memory`, set by
``init_model`` and the benchmark): each call's output and scratch buffers
reuse memory instead of faulting fresh pages in, as they do in the models.
"""
import argparse
import statistics
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


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    keep_freed_memory()
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = DTYPES[args.dtype]
    n, h, d = args.tokens, args.heads, args.head_dims
    kvh = args.kv_heads or h
    c = h * d
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, h, n, d, generator=gen).to(dtype)
    k = torch.randn(1, kvh, n, d, generator=gen).to(dtype)
    v = torch.randn(1, kvh, n, d, generator=gen).to(dtype)
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
    if d == 64 and cpu_attention_available(dtype):
        cands[f'{args.dtype} CPU kernel (sapiens_mm)'] = (
            lambda: cpu_attention(q, k, v), att_flops)
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
