#!/usr/bin/env bash
# Training on a SLURM cluster with srun (one task per GPU, --launcher slurm).
#
#   bash tools/slurm_train.sh PARTITION JOB_NAME CONFIG WORK_DIR [tools/train.py options]
#
# Environment: GPUS (8, total tasks), GPUS_PER_NODE (8), CPUS_PER_TASK (5),
# SRUN_ARGS (extra srun options, e.g. "--quotatype=auto" or
# "--time=72:00:00"), PYTHON (default: the
# active virtual environment's python, else the repository's
# .venv/bin/python, else python3). mmengine reads the rank and world
# size from SLURM_PROCID / SLURM_NTASKS and the master node from
# SLURM_NODELIST; set MASTER_PORT to move off the default port 29500.
set -euo pipefail
if [ $# -lt 4 ]; then
    echo "usage: $0 PARTITION JOB_NAME CONFIG WORK_DIR [train.py options]" >&2
    exit 2
fi
PARTITION=$1
JOB_NAME=$2
CONFIG=$3
WORK_DIR=$4
shift 4
GPUS=${GPUS:-8}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
CPUS_PER_TASK=${CPUS_PER_TASK:-5}
SRUN_ARGS=${SRUN_ARGS:-""}
TOOLS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tools/project_python.sh
. "${TOOLS_DIR}/project_python.sh"

# SRUN_ARGS is split into words on purpose.
# shellcheck disable=SC2086
export PYTHONPATH="${TOOLS_DIR}/..${PYTHONPATH:+:${PYTHONPATH}}"
exec srun -p "${PARTITION}" \
    --job-name="${JOB_NAME}" \
    --gres=gpu:"${GPUS_PER_NODE}" \
    --ntasks="${GPUS}" \
    --ntasks-per-node="${GPUS_PER_NODE}" \
    --cpus-per-task="${CPUS_PER_TASK}" \
    --kill-on-bad-exit=1 \
    ${SRUN_ARGS} \
    "${PYTHON}" -u "${TOOLS_DIR}/train.py" "${CONFIG}" \
    --work-dir="${WORK_DIR}" --launcher=slurm "$@"
