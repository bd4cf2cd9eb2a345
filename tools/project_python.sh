# Sourced by the launchers (tools/dist_*.sh, tools/slurm_*.sh): sets PYTHON
# to the project's Python, so that a launcher runs as printed whether or not
# the virtual environment is activated. In order:
#   1. $PYTHON, if set (a path, or a name on PATH);
#   2. the active virtual environment's ($VIRTUAL_ENV/bin/python);
#   3. the repository's .venv/bin/python (what tools/setup_env.sh creates);
#   4. python3 from PATH.
# Needs TOOLS_DIR (the folder of the launcher).
if [ -z "${PYTHON:-}" ]; then
    if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "${VIRTUAL_ENV}/bin/python" ]; then
        PYTHON="${VIRTUAL_ENV}/bin/python"
    elif [ -x "${TOOLS_DIR}/../.venv/bin/python" ]; then
        PYTHON="$(cd "${TOOLS_DIR}/.." && pwd)/.venv/bin/python"
    else
        PYTHON=python3
    fi
fi
