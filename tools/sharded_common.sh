# Shared by tools/dist_infer.sh and tools/slurm_infer.sh (sourced): wait for
# the launcher, forward SIGTERM to it, and on failure report the ranks that
# did not finish.

# The --out-dir of the command line (the tools' defaults otherwise).
sharded_out_dir() {
    local script=$1
    shift
    local out="" prev="" first=""
    for arg in "$@"; do
        if [ "${prev}" = "--out-dir" ]; then out=${arg}; fi
        case "${arg}" in --out-dir=*) out=${arg#--out-dir=} ;; esac
        if [ -z "${first}" ] && [[ "${arg}" != -* ]]; then first=${arg}; fi
        prev=${arg}
    done
    if [ -z "${out}" ]; then
        case "${script}" in
            *curate_images.py) out="${first}/curation" ;;
            *) out=outputs ;;
        esac
    fi
    echo "${out}"
}

# run_and_report PID SCRIPT ARGS...: wait for PID (SIGTERM is passed on to
# it), exit with its code; 75 when every unfinished rank stopped on SIGTERM.
run_and_report() {
    local pid=$1 script=$2
    shift 2
    trap 'kill -TERM "${pid}" 2>/dev/null' TERM INT
    local rc=0
    wait "${pid}" || rc=$?
    while kill -0 "${pid}" 2>/dev/null; do  # woken by the trap: wait again
        rc=0
        wait "${pid}" || rc=$?
    done
    if [ "${rc}" -ne 0 ]; then
        local out
        out=$(sharded_out_dir "${script}" "$@")
        echo "$(basename "${script}"): the launcher exited with code ${rc}" >&2
        local status=0
        "${PYTHON}" "${TOOLS_DIR}/sharded_status.py" "${out}" >&2 || status=$?
        if [ "${status}" -eq 75 ]; then
            rc=75
        fi
    fi
    exit "${rc}"
}
