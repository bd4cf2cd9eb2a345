#!/usr/bin/env bash
# Distributed testing with torchrun (one process per GPU).
#
#   bash tools/dist_test.sh CONFIG CHECKPOINT NUM_GPUS [tools/test.py options]
#
# Multi-node: run the same command on every node with
#   NNODES=<nodes> NODE_RANK=<0..NNODES-1> MASTER_ADDR=<node 0 host> PORT=<free port>
# Environment: NNODES (1), NODE_RANK (0), MASTER_ADDR (127.0.0.1),
# PORT (29500), PYTHON (default: the
# active virtual environment's python, else the repository's
# .venv/bin/python, else python3).
set -euo pipefail
if [ $# -lt 3 ]; then
    echo "usage: $0 CONFIG CHECKPOINT NUM_GPUS [test.py options]" >&2
    exit 2
fi
CONFIG=$1
CHECKPOINT=$2
GPUS=$3
shift 3
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}
TOOLS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tools/project_python.sh
. "${TOOLS_DIR}/project_python.sh"

export PYTHONPATH="${TOOLS_DIR}/..${PYTHONPATH:+:${PYTHONPATH}}"
exec "${PYTHON}" -m torch.distributed.run \
    --nnodes="${NNODES}" \
    --node_rank="${NODE_RANK}" \
    --master_addr="${MASTER_ADDR}" \
    --master_port="${PORT}" \
    --nproc_per_node="${GPUS}" \
    "${TOOLS_DIR}/test.py" "${CONFIG}" "${CHECKPOINT}" --launcher pytorch "$@"
