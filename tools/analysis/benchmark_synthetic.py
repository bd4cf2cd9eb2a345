#!/usr/bin/env python
"""Benchmark the synthetic human generator on one CPU core.

Prints the images per second of :func:`render_sample` (scene, ray casting,
shading and labels) and of the full generator step (render + PNG/NPY
encoding and writing), both single-threaded and pinned to one core.  Two
figures are given: wall clock, and CPU time of this process (the
throughput of one dedicated core; on a shared machine other processes may
steal wall-clock time).  Each is the median over batches of 50 images.

Example::

    python tools/analysis/benchmark_synthetic.py --num 200
"""
from __future__ import annotations

import os

# one thread everywhere, before numpy (or anything importing it) loads
for _var in ('OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS',
             'NUMEXPR_NUM_THREADS', 'VECLIB_MAXIMUM_THREADS'):
    os.environ[_var] = '1'

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402


def parse_args():
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--num', type=int, default=200,
                        help='images per measurement (default: 200)')
    parser.add_argument('--height', type=int, default=256)
    parser.add_argument('--width', type=int, default=192)
    parser.add_argument('--max-people', type=int, default=3)
    parser.add_argument('--no-write', action='store_true',
                        help='only time render_sample')
    return parser.parse_args()


def main() -> int:
    """Run the benchmark and print the figures."""
    args = parse_args()
    if hasattr(os, 'sched_setaffinity'):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    try:  # torch may already be imported by sapiens_mm: keep it at 1 thread
        import torch
        torch.set_num_threads(1)
    except ImportError:
        pass
    from sapiens_mm.datasets.synthetic import render_sample
    from sapiens_mm.datasets.synthetic.writer import render_and_save

    size = (args.height, args.width)
    for s in range(5):  # warm-up (caches, lazily built tables)
        render_sample(10_000 + s, size=size, max_people=args.max_people)

    def timed(fn, n):
        walls, cpus = [], []
        for b0 in range(0, n, 50):
            w, c = time.perf_counter(), time.process_time()
            for i in range(b0, min(b0 + 50, n)):
                fn(i)
            k = min(b0 + 50, n) - b0
            walls.append((time.perf_counter() - w) / k)
            cpus.append((time.process_time() - c) / k)
        return statistics.median(walls), statistics.median(cpus)

    people = []
    wall, cpu = timed(lambda i: people.append(len(render_sample(
        i, size=size, max_people=args.max_people)['people'])), args.num)
    print(f'render_sample {size[0]}x{size[1]}, 1 thread, {args.num} images '
          f'({sum(people) / len(people):.2f} people/image): '
          f'{1 / wall:.1f} images/s wall ({1e3 * wall:.1f} ms/image), '
          f'{1 / cpu:.1f} images/s CPU time ({1e3 * cpu:.1f} ms/image)')
    if not args.no_write:
        with tempfile.TemporaryDirectory() as tmp:
            for sub in ('images', 'masks', 'depths', 'normals'):
                os.makedirs(os.path.join(tmp, 'train', sub))
            wall, cpu = timed(lambda i: render_and_save(
                (tmp, 'train', i, 0, size, args.max_people, False)), args.num)
        print(f'render + write PNG/NPY: {1 / wall:.1f} images/s wall '
              f'({1e3 * wall:.1f} ms/image), {1 / cpu:.1f} images/s CPU '
              f'time ({1e3 * cpu:.1f} ms/image)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
