#!/usr/bin/env bash
# Create or refresh the project's virtual environment (.venv by default).
#
# Idempotent: a second run whose inputs (requirements, setup.py, this script)
# have not changed only checks a stamp file and exits within seconds.
# The mmcv 2.1.0 wheel (full build with ops, ~10 min on 2 cores) is built once
# and kept in $SAPIENS_MM_WHEEL_CACHE (default ~/.cache/sapiens_mm/wheels), so
# later set-ups on the same machine (CI included) reuse it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${SAPIENS_MM_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3.11}"
WHEELS="${SAPIENS_MM_WHEEL_CACHE:-$HOME/.cache/sapiens_mm/wheels}"
MMCV_VERSION=2.1.0

log() { printf '[setup] %s\n' "$*"; }

if ! command -v "$PYTHON" >/dev/null 2>&1; then
  log "error: $PYTHON not found. Install Python 3.11 or set PYTHON=/path/to/python3.11." >&2
  exit 1
fi

# The browser test of the web demo (tests/demo/test_web_demo.py) drives Debian's
# headless Chromium through chromedriver: install both when missing (as root
# with apt-get, e.g. CI; otherwise say how).
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    log "installing chromium and chromium-driver (apt-get) for the browser test"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  else
    log "warning: chromium / chromedriver missing; tests/demo/test_web_demo.py will skip." \
        "Install them with: sudo apt-get install -y chromium chromium-driver" >&2
  fi
fi

# The emulated AVX2-only CPU test (tests/test_emulated_cpu.py) runs the package
# under Debian's user-mode QEMU (qemu-x86_64 -cpu Haswell): install it when
# missing (as root with apt-get, e.g. CI; otherwise say how).
if ! command -v qemu-x86_64 >/dev/null 2>&1; then
  if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    log "installing qemu-user (apt-get) for the emulated-CPU test"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user >/dev/null
  else
    log "warning: qemu-x86_64 missing; tests/test_emulated_cpu.py will skip." \
        "Install it with: sudo apt-get install -y qemu-user" >&2
  fi
fi

# The CPU kernels' sources are inputs too: the editable install builds them
# in place (setup.py), and a library older than its sources is not used.
stamp_inputs() {
  cat "$ROOT/requirements.txt" "$ROOT/requirements-test.txt" \
      "$ROOT/requirements-docs.txt" "$ROOT/setup.py" "$ROOT/tools/setup_env.sh" \
      "$ROOT"/sapiens_mm/utils/csrc/*.[ch] \
      | sha256sum | cut -d' ' -f1
}
STAMP="$VENV/.sapiens_mm_stamp"
WANT="$(stamp_inputs)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" && -x "$VENV/bin/python" ]]; then
  log "environment $VENV is up to date"
  exit 0
fi

start=$(date +%s)
if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating virtual environment $VENV"
  "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"
PIP_CMD=("$PY" -m pip --disable-pip-version-check -q)
# pip, quiet, minus the "Location ... is ignored" noise some pip configs print.
pipq() {
  "${PIP_CMD[@]}" "$@" 2> >(grep -v '^WARNING: Location' >&2)
}

req() { grep -E "^$1[=<>]" "$ROOT/requirements.txt" | head -n1; }

log "stage 1/4: torch, torchvision, numpy, build tools"
pipq install "$(req torch)" "$(req torchvision)" "$(req numpy)" wheel

# The mmcv extension is tied to the torch ABI: one cache folder per torch version.
WHEELS="$WHEELS/torch-$(req torch | sed 's/.*==//')"
mkdir -p "$WHEELS"
MMCV_WHEEL="$(ls "$WHEELS"/mmcv-${MMCV_VERSION}-*.whl 2>/dev/null | head -n1 || true)"
if [[ -z "$MMCV_WHEEL" ]]; then
  log "stage 2/4: building mmcv ${MMCV_VERSION} with ops from source (15-30 minutes on 2 cores, once per machine)"
  # mmcv's setup.py imports pkg_resources (gone from setuptools>=70); torch wants
  # setuptools>=77 at run time, restored in stage 3.
  pipq install 'setuptools<70'
  # torch >= 2.10 headers need C++20, mmcv 2.1.0's setup.py asks for C++17:
  # build from the sdist with that flag raised.
  build_dir="$(mktemp -d)"
  trap 'rm -rf "$build_dir"' EXIT
  pipq download --no-deps --no-binary :all: "mmcv==${MMCV_VERSION}" -d "$build_dir"
  tar xzf "$build_dir/mmcv-${MMCV_VERSION}.tar.gz" -C "$build_dir"
  sed -i 's/-std=c++17/-std=c++20/g' "$build_dir/mmcv-${MMCV_VERSION}/setup.py"
  MMCV_WITH_OPS=1 MAX_JOBS="${MAX_JOBS:-$(nproc)}" \
    pipq wheel --no-build-isolation --no-deps "$build_dir/mmcv-${MMCV_VERSION}" -w "$WHEELS"
  MMCV_WHEEL="$(ls "$WHEELS"/mmcv-${MMCV_VERSION}-*.whl | head -n1)"
else
  log "stage 2/4: reusing cached mmcv wheel $MMCV_WHEEL"
fi
pipq install "$MMCV_WHEEL"

log "stage 3/4: OpenMMLab packages, the other dependencies, the docs tools"
pipq install -r "$ROOT/requirements.txt" -r "$ROOT/requirements-test.txt" \
  -r "$ROOT/requirements-docs.txt" 'setuptools>=77.0.3,<81'
pipq install --no-deps mmpose==1.3.2
# OpenMMLab's mim (`mim download sapiens_mm --config NAME`): without its
# opendatalab / openxlab dependencies, which would downgrade requests,
# urllib3, rich, setuptools, tqdm, ...; what `mim download` imports is
# installed above (requirements-test.txt)
pipq install --no-deps openmim==0.3.9

log "stage 4/4: sapiens_mm (editable)"
# compat mode: the checkout itself on sys.path (a .pth line), not an import
# hook that comes after it, so that a script beside the clone imports the
# real package rather than the clone's folder as an empty namespace package
pipq install --no-deps --no-build-isolation -e "$ROOT" --config-settings editable_mode=compat

"$PY" -c "import sapiens_mm; print('[setup] sapiens_mm', sapiens_mm.__version__, 'imports fine')"
echo "$WANT" > "$STAMP"
log "done in $(( $(date +%s) - start )) s"
