#!/usr/bin/env bash
# GPU speed of the Sapiens encoders: images/s and the achieved fraction of
# the GPU's peak bf16 FLOP/s at batch 1 and 8, for sapiens_0.3b and
# sapiens_1b at 1024x768 (target: >= 40 % at batch 8 for 0.3b), plus the
# limit from the GPU's own matmul / attention kernel rates and the speed
# ratio against stock mmpretrain. Every number comes from
# tools/analysis/benchmark.py; a table is printed at the end.
#
#   bash tools/analysis/gpu_benchmark.sh                      # known GPU
#   bash tools/analysis/gpu_benchmark.sh --peak-tflops 989    # any GPU
#   bash tools/analysis/gpu_benchmark.sh --compile
#
# Extra arguments go to every benchmark.py call. Environment overrides:
# PYTHON (.venv/bin/python), DEVICE (cuda), ARCHS ("sapiens_0.3b
# sapiens_1b"), BATCH_SIZES ("1 8"), DTYPE (bf16), IMG_SIZE ("1024 768"),
# WARMUP (3), REPEATS (10), OUT (work_dirs/gpu_benchmark).
# The peak is looked up by GPU name (H100/H200 SXM 989, H100 PCIe 756,
# A100 312 dense bf16 TFLOP/s); give --peak-tflops for other GPUs.
set -euo pipefail

cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-.venv/bin/python}
DEVICE=${DEVICE:-cuda}
ARCHS=${ARCHS:-sapiens_0.3b sapiens_1b}
BATCH_SIZES=${BATCH_SIZES:-1 8}
DTYPE=${DTYPE:-bf16}
IMG_SIZE=${IMG_SIZE:-1024 768}
WARMUP=${WARMUP:-3}
REPEATS=${REPEATS:-10}
OUT=${OUT:-work_dirs/gpu_benchmark}
mkdir -p "$OUT"

for arch in $ARCHS; do
  for bs in $BATCH_SIZES; do
    echo "### $arch batch $bs $DTYPE on $DEVICE"
    # shellcheck disable=SC2086
    "$PYTHON" tools/analysis/benchmark.py --arch "$arch" --batch-size "$bs" \
      --dtype "$DTYPE" --device "$DEVICE" --img-size $IMG_SIZE \
      --warmup "$WARMUP" --repeats "$REPEATS" --compare-stock \
      --json "$OUT/${arch}_bs${bs}.json" "$@"
  done
done

"$PYTHON" - "$OUT" $ARCHS -- $BATCH_SIZES <<'PY'
import json
import sys

out = sys.argv[1]
sep = sys.argv.index('--')
archs, sizes = sys.argv[2:sep], sys.argv[sep + 1:]
print('\n| arch | batch | images/s | latency median (ms) | peak mem (MiB) '
      '| TFLOP/s | % of peak | achieved/limit | speed vs stock |')
print('|---|---|---|---|---|---|---|---|---|')
for arch in archs:
    for bs in sizes:
        with open(f'{out}/{arch}_bs{bs}.json') as f:
            r = json.load(f)['model_only']
        frac = r.get('peak_fraction')
        print(f"| {arch} | {bs} | {r['images_per_s']:.2f} | "
              f"{r['latency']['median'] * 1e3:.1f} | "
              f"{r['peak_mem'] / 2**20:.0f} | "
              f"{r['gflops_per_s'] / 1e3:.1f} | "
              f"{'n/a' if frac is None else f'{100 * frac:.1f}'} | "
              f"{r['achieved_over_limit']:.2f} | "
              f"{next(iter(r['comparisons'].values()))['speedup']:.2f}x |")
PY
