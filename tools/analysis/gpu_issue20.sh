#!/usr/bin/env bash
# Issue 20's GPU measurements as one call on a fresh GPU machine (this
# project's lent H200: Python 3.12 + PyTorch, no network), within a time
# budget, most important rows first:
#
#   setup     tools/analysis/gpu_stack.sh install (the carried .gpu_stack
#             folder; pack it here first: bash tools/analysis/gpu_stack.sh pack)
#   tests     tests/analysis/test_inference_speed.py on the GPU (CUDA-graph replay and
#             the CUDA attention kernels against eager / math)
#   model     bf16 model-only rows, sapiens_0.3b and sapiens_1b at batch 1
#             and 8, against stock mmpretrain (the README's table)
#   options   attention kernel (cuDNN / flash / efficient) at batch 8, CUDA
#             graphs at batch 1 (and 8)
#   e2e       end to end on a generated 1080p video with 1-5 people per
#             frame: seg + depth + normal, then pose-308 + the three
#   train     gpu_train_check.py: 0.3b and 1b, plain (one GPU, bf16
#             autocast) and FSDP + activation checkpointing + bf16
#   compile   torch.compile: default at batch 8, reduce-overhead at batch 1,
#             max-autotune-no-cudagraphs at batch 8
#   sapiens2  Sapiens2 0.4b / 1b rows (against their plain reference)
#
# Each stage runs only if its estimate fits in what is left of BUDGET
# seconds (default 480); the rest is listed as skipped, so a second call
# with STAGES="..." finishes the job. Results: $OUT/log.txt (everything
# printed), $OUT/summary.md (the tables), $OUT/results.tar.gz (per-row
# JSON), refreshed after every stage.
#
#   bash tools/analysis/gpu_issue20.sh                      # on the GPU
#   STAGES="train compile" bash tools/analysis/gpu_issue20.sh
#   DEVICE=cpu DRY=1 bash tools/analysis/gpu_issue20.sh     # check it here
#
# DRY=1 runs every stage with tiny archs and inputs and the project's own
# .venv (no install): it checks the script, not the speed.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT="${OUT:-$ROOT/work_dirs/gpu_issue20}"
DEVICE="${DEVICE:-cuda}"
DRY="${DRY:-0}"
BUDGET="${BUDGET:-480}"
STAGES="${STAGES:-setup tests model options e2e train compile sapiens2}"
RESULTS="${RESULTS:-$ROOT/work_dirs/gpu_issue20_results}"
mkdir -p "$OUT" "$RESULTS"
export PYTHONUNBUFFERED=1 OUT DEVICE DRY BUDGET RESULTS

# seconds each stage needs on an H200 (estimates; setup includes the mmcv
# build, about 1 minute on 16 cores)
declare -A NEED=([setup]=120 [tests]=40 [model]=80 [options]=130 [e2e]=150
                 [train]=200 [compile]=240 [sapiens2]=80)
if [[ "$DRY" == 1 ]]; then
  PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
  export PYTHONPATH="$ROOT"
  for s in "${!NEED[@]}"; do NEED[$s]=1; done
  DRYFLAG=(--dry)
  DTYPE="${DTYPE:-fp32}"
else
  PYTHON="${PYTHON:-python3}"
  SITE="${SITE:-/tmp/sapiens_site}"
  export PYTHONPATH="$SITE:$ROOT"
  DRYFLAG=()
  DTYPE="${DTYPE:-bf16}"
fi
DRIVER=("$PYTHON" tools/analysis/gpu_issue20.py --results "$RESULTS"
        --device "$DEVICE" --dtype "$DTYPE" "${DRYFLAG[@]}")

declare -A STATUS=()
pack_results() {
  tar czf "$OUT/results.tar.gz" -C "$RESULTS" . 2>/dev/null
  "${DRIVER[@]}" summary --out "$OUT/summary.md" >/dev/null 2>&1 || true
}

train_rows() {
  local cfgs=(configs/fsdp/sapiens_0.3b-200e_goliath-1024x768-seg_fsdp_bf16.py
              configs/fsdp/sapiens_1b-200e_goliath-1024x768-seg_fsdp_bf16.py)
  local extra=(--iters 5)
  [[ "$DRY" == 1 ]] && { cfgs=("${cfgs[0]}"); extra=(--iters 2 --cpu-smoke); }
  local rc=0
  for cfg in "${cfgs[@]}"; do
    local base; base="$(basename "$cfg" .py)"
    for mode in fsdp plain; do
      local flags=()
      # plain: one GPU, no FSDP, no activation checkpointing, bf16 autocast
      [[ "$mode" == plain ]] && flags=(--no-fsdp --no-cp)
      echo "-- train $base $mode"
      timeout 150 "$PYTHON" tools/analysis/gpu_train_check.py --config "$cfg" \
        "${extra[@]}" "${flags[@]}" --work-dir "$RESULTS/train_work" \
        --json "$RESULTS/train__${base}_${mode}.json" 2>&1 \
        | grep -v -E 'Iter\(train\)|^\s*$' || rc=1
    done
  done
  rm -rf "$RESULTS/train_work"
  return $rc
}

run_stage() {
  case "$1" in
    setup)
      if [[ "$DRY" == 1 ]]; then echo "dry run: the project's .venv"; return 0; fi
      nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm --format=csv || true
      MMCV_WHEEL_OUT="$OUT" bash tools/analysis/gpu_stack.sh install "$ROOT/.gpu_stack" ;;
    tests)
      "$PYTHON" -m pytest -q -p no:cacheprovider tests/analysis/test_inference_speed.py \
        -k 'not compile_mode' ;;
    model|options|compile|sapiens2|e2e) "${DRIVER[@]}" "$1" ;;
    train) train_rows ;;
    *) echo "unknown stage $1"; return 2 ;;
  esac
}

# internal: one stage, in a process of its own (so that timeout can stop it)
if [[ "${1:-}" == __stage ]]; then run_stage "$2"; exit $?; fi

exec > >(tee -a "$OUT/log.txt") 2>&1
start=$SECONDS
for stage in $STAGES; do
  left=$(( BUDGET - (SECONDS - start) ))
  if [[ -z "${NEED[$stage]:-}" ]]; then
    echo "unknown stage $stage (known: ${!NEED[*]})"; STATUS[$stage]=unknown; continue
  fi
  if (( left < ${NEED[$stage]} )); then
    echo "### $stage: skipped (${left} s left, needs ~${NEED[$stage]} s)"
    STATUS[$stage]=skipped; continue
  fi
  echo "### $stage ($(date -u +%T), ${left} s left)"
  t0=$SECONDS
  if timeout "$left" bash "${BASH_SOURCE[0]}" __stage "$stage"; then
    STATUS[$stage]="ok $(( SECONDS - t0 )) s"
  else
    STATUS[$stage]="FAILED/timeout after $(( SECONDS - t0 )) s"
    [[ "$stage" == setup ]] && { echo "setup failed: stopping"; pack_results; break; }
  fi
  [[ "$stage" == setup ]] && "${DRIVER[@]}" env
  pack_results
done
[[ -f "$RESULTS/env.json" ]] || "${DRIVER[@]}" env
pack_results
echo "### stages:"; for s in $STAGES; do echo "  $s: ${STATUS[$s]:-not run}"; done
echo "### summary ($OUT/summary.md):"
cat "$OUT/summary.md" 2>/dev/null
