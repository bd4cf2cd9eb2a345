#!/usr/bin/env bash
# Sharded inference (or curation) on a SLURM cluster with srun (one task per
# GPU, --launcher slurm). Resumable: run the same command again, or let a
# requeued job run it again, to continue.
#
#   bash tools/slurm_infer.sh PARTITION JOB_NAME INPUTS... [tools/infer.py options]
#   bash tools/slurm_infer.sh PARTITION JOB_NAME tools/curate_images.py ROOT [options]
#
# Environment: GPUS (8, total tasks), GPUS_PER_NODE (8), CPUS_PER_TASK (5),
# SRUN_ARGS (extra srun options), PYTHON (default: the
# active virtual environment's python, else the repository's
# .venv/bin/python, else python3). Set MASTER_PORT to move
# off the default port 29500.
# Pre-emption: SLURM sends SIGTERM; each rank finishes its batch, flushes its
# manifest and exits with 75. Inside an sbatch job with REQUEUE=1, the job is
# then requeued (scontrol requeue) and resumes where it stopped.
set -uo pipefail
if [ $# -lt 3 ]; then
    echo "usage: $0 PARTITION JOB_NAME [tools/curate_images.py] INPUTS... [options]" >&2
    exit 2
fi
PARTITION=$1
JOB_NAME=$2
shift 2
TOOLS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tools/project_python.sh
. "${TOOLS_DIR}/project_python.sh"
SCRIPT="${TOOLS_DIR}/infer.py"
if [[ "$1" == *.py ]]; then
    SCRIPT=$1
    shift
fi
GPUS=${GPUS:-8}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
CPUS_PER_TASK=${CPUS_PER_TASK:-5}
SRUN_ARGS=${SRUN_ARGS:-""}
# shellcheck source=tools/sharded_common.sh
. "${TOOLS_DIR}/sharded_common.sh"

export PYTHONPATH="${TOOLS_DIR}/..${PYTHONPATH:+:${PYTHONPATH}}"
# shellcheck disable=SC2086
srun -p "${PARTITION}" \
    --job-name="${JOB_NAME}" \
    --gres=gpu:"${GPUS_PER_NODE}" \
    --ntasks="${GPUS}" \
    --ntasks-per-node="${GPUS_PER_NODE}" \
    --cpus-per-task="${CPUS_PER_TASK}" \
    --kill-on-bad-exit=1 \
    ${SRUN_ARGS} \
    "${PYTHON}" -u "${SCRIPT}" "$@" --launcher=slurm &
SRUN_PID=$!
if [ "${REQUEUE:-0}" = "1" ] && [ -n "${SLURM_JOB_ID:-}" ]; then
    # run_and_report exits; requeue from an EXIT trap when it says 75
    trap 'rc=$?; if [ "${rc}" -eq 75 ]; then scontrol requeue "${SLURM_JOB_ID}"; fi' EXIT
fi
run_and_report "${SRUN_PID}" "${SCRIPT}" "$@"
