#!/usr/bin/env bash
# Sharded inference (or curation) with torchrun: one process per GPU, CPU
# processes on a machine without GPUs (gloo). Resumable: run the same
# command again to continue an interrupted run.
#
#   bash tools/dist_infer.sh NUM_PROCS INPUTS... [tools/infer.py options]
#   bash tools/dist_infer.sh NUM_PROCS tools/curate_images.py ROOT [options]
#
# Multi-node: run the same command on every node with
#   NNODES=<nodes> NODE_RANK=<0..NNODES-1> MASTER_ADDR=<node 0 host> PORT=<free port>
# Environment: NNODES (1), NODE_RANK (0), MASTER_ADDR (127.0.0.1),
# PORT (29500), PYTHON (default: the
# active virtual environment's python, else the repository's
# .venv/bin/python, else python3).
# Exit code: 0 done; 75 stopped by SIGTERM after flushing (requeue / re-run
# to resume); otherwise a rank failed: the ranks that did not finish and
# their in-flight inputs are printed (tools/sharded_status.py). A rank lost
# on another node is named by rank 0 after --rank-timeout seconds without
# its heartbeat (SAPIENS_MM_RANK_TIMEOUT, default 600).
set -uo pipefail
if [ $# -lt 2 ]; then
    echo "usage: $0 NUM_PROCS [tools/curate_images.py] INPUTS... [options]" >&2
    exit 2
fi
NPROCS=$1
shift
TOOLS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=tools/project_python.sh
. "${TOOLS_DIR}/project_python.sh"
SCRIPT="${TOOLS_DIR}/infer.py"
if [[ "$1" == *.py ]]; then
    SCRIPT=$1
    shift
fi
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
PORT=${PORT:-29500}
MASTER_ADDR=${MASTER_ADDR:-127.0.0.1}
# shellcheck source=tools/sharded_common.sh
. "${TOOLS_DIR}/sharded_common.sh"

export PYTHONPATH="${TOOLS_DIR}/..${PYTHONPATH:+:${PYTHONPATH}}"
"${PYTHON}" -m torch.distributed.run \
    --nnodes="${NNODES}" \
    --node_rank="${NODE_RANK}" \
    --master_addr="${MASTER_ADDR}" \
    --master_port="${PORT}" \
    --nproc_per_node="${NPROCS}" \
    "${SCRIPT}" "$@" --launcher pytorch &
run_and_report $! "${SCRIPT}" "$@"
