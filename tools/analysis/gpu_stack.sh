#!/usr/bin/env bash
# The sapiens_mm stack on a GPU machine that has Python 3.12 and PyTorch but
# no network (this project's lent H200 machines), in two steps:
#
#   bash tools/analysis/gpu_stack.sh pack [DIR]     # here, with pip access
#   bash tools/analysis/gpu_stack.sh install [DIR]  # there (no network)
#
# pack downloads the pure-Python OpenMMLab stack and its dependencies that
# the GPU image lacks as Python 3.12 / manylinux x86-64 wheels into DIR
# (default .gpu_stack, git-ignored; ~14 MiB), the mmcv 2.1.0 source, and
# builds xtcocotools (no Python 3.12 wheel on PyPI) in a throw-away Python
# 3.12 virtual environment (PY312, default python3.12). It needs the
# project's .venv (make setup): pip runs mmcv's setup.py, which imports torch,
# to read the source's metadata.
#
# install (PYTHON, default python3: the image's Python that holds torch)
# installs those wheels with `pip --no-index --no-deps --target SITE`
# (SITE, default /tmp/sapiens_site; the image's torch, numpy, scipy,
# opencv... are reused), builds mmcv 2.1.0 with its C++ ops for the CPU
# (mmseg imports mmcv.ops at import time; sapiens_mm runs none of them, so
# they are compiled without optimisation, -O1 -g0, ~1 min on 16 cores) with
# setuptools 69 (mmcv's setup.py needs pkg_resources), and checks that
# `import sapiens_mm` works. Then run the tools with
#   export PYTHONPATH=SITE:<repository root>
# A carried DIR/mmcv-2.1.0-*.whl built by an earlier install skips the build;
# with MMCV_WHEEL_OUT=folder the built wheel is also copied there.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CMD="${1:-}"
DIR="$(realpath -m "${2:-$ROOT/.gpu_stack}")"
MMCV_VERSION=2.1.0
XTCOCOTOOLS_VERSION=1.14.3
SETUPTOOLS_FOR_MMCV=setuptools==69.5.1
# The versions of the CPU set-up (tools/setup_env.sh) where the GPU image
# lacks the package; the image's own numpy, scipy, matplotlib, opencv,
# pillow, pyyaml, rich, tqdm, einops, six, regex, zipp, markdown, click and
# cython are used as they are.
WHEELS=(
  mmengine==0.10.7 mmpretrain==1.2.0 mmsegmentation==1.2.2 mmdet==3.3.0
  mmpose==1.3.2
  addict==2.4.0 yapf==0.43.0 platformdirs==4.14.9 termcolor==3.3.0
  json-tricks==3.17.3 munkres==3.0.0
  ftfy==6.3.1 wcwidth==0.9.4 prettytable==3.18.0
  mat4py==0.6.0 modelindex==0.0.2 model-index==0.1.11 ordered-set==4.1.0
  importlib-metadata==10.2.0 lazy-importer==0.1.0
  shapely==2.2.0 terminaltables==3.1.10 pycocotools==2.0.11
  "$SETUPTOOLS_FOR_MMCV"
)

log() { printf '[gpu_stack] %s\n' "$*"; }
die() { printf '[gpu_stack] error: %s\n' "$*" >&2; exit 1; }

pack() {
  local py="${PY312:-python3.12}"
  command -v "$py" >/dev/null 2>&1 || die "$py not found: set PY312 to a Python 3.12 interpreter (it builds xtcocotools for the GPU image's Python 3.12)."
  mkdir -p "$DIR"
  local platforms=()
  for n in 17 24 27 28 31 34 35; do platforms+=(--platform "manylinux_2_${n}_x86_64"); done
  log "downloading ${#WHEELS[@]} wheels for CPython 3.12, manylinux x86-64 into $DIR"
  "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --abi cp312 --abi abi3 --abi none "${platforms[@]}" \
    --platform manylinux2014_x86_64 --platform any -d "$DIR" "${WHEELS[@]}"
  local build
  build="$(mktemp -d)"
  trap 'rm -rf "$build"' RETURN
  # pip reads the sdist's metadata by running its setup.py, which imports
  # torch: the project's own environment (tools/setup_env.sh) has it.
  local sdist_py="${SDIST_PYTHON:-$ROOT/.venv/bin/python}"
  [[ -x "$sdist_py" ]] || die "$sdist_py not found: run 'make setup' first, or set SDIST_PYTHON to a Python with torch."
  log "mmcv ${MMCV_VERSION} source"
  "$sdist_py" -m pip download -q --no-deps --no-binary :all: \
    "mmcv==${MMCV_VERSION}" -d "$DIR"
  log "building xtcocotools ${XTCOCOTOOLS_VERSION} for Python 3.12 (numpy 2 ABI)"
  "$py" -m venv "$build/venv"
  "$build/venv/bin/python" -m pip install -q 'numpy>=2,<3' cython setuptools wheel
  "$build/venv/bin/python" -m pip wheel -q --no-deps --no-build-isolation \
    -w "$DIR" "xtcocotools==${XTCOCOTOOLS_VERSION}"
  (cd "$DIR" && ls -1 ./*.whl ./*.tar.gz | sort | xargs sha256sum > SHA256SUMS)
  log "done: $(ls "$DIR" | wc -l) files, $(du -sh "$DIR" | cut -f1) in $DIR"
}

install() {
  local py="${PYTHON:-python3}" site="${SITE:-/tmp/sapiens_site}"
  [[ -d "$DIR" ]] || die "$DIR does not exist: run 'bash tools/analysis/gpu_stack.sh pack' on a machine with pip access and carry the folder."
  (cd "$DIR" && sha256sum --quiet -c SHA256SUMS) || die "files in $DIR do not match $DIR/SHA256SUMS: pack again."
  "$py" -c 'import torch' 2>/dev/null || die "$py has no torch: set PYTHON to the interpreter that holds PyTorch."
  local start=$SECONDS tools="$site.build"
  mkdir -p "$site" "$tools"
  log "installing the wheels into $site"
  local wheels=()
  for w in "$DIR"/*.whl; do
    case "$(basename "$w")" in
      setuptools-*|mmcv-*) ;;  # build tool / mmcv: below
      *) wheels+=("$w") ;;
    esac
  done
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target "$site" "${wheels[@]}"
  local mmcv_wheel
  mmcv_wheel="$(ls "$DIR"/mmcv-${MMCV_VERSION}-*.whl 2>/dev/null | head -n1 || true)"
  if [[ -z "$mmcv_wheel" ]]; then
    log "building mmcv ${MMCV_VERSION} with CPU ops ($(nproc) jobs)"
    "$py" -m pip install -q --no-index --no-deps --no-compile --target "$tools" \
      "$DIR"/setuptools-*.whl
    rm -rf "$tools/src" && mkdir -p "$tools/src" "$tools/wheel"
    tar xzf "$DIR/mmcv-${MMCV_VERSION}.tar.gz" -C "$tools/src"
    # torch >= 2.10 headers need C++20 (as in tools/setup_env.sh)
    sed -i 's/-std=c++17/-std=c++20/g' "$tools/src/mmcv-${MMCV_VERSION}/setup.py"
    (
      # no GPU visible: mmcv builds its CPU extension, not the CUDA one
      export CUDA_VISIBLE_DEVICES='' MMCV_WITH_OPS=1 MAX_JOBS="$(nproc)"
      export CFLAGS="${MMCV_CFLAGS:--g0 -O1}" PYTHONPATH="$tools"
      "$py" -m pip wheel -q --no-index --no-deps --no-build-isolation \
        -w "$tools/wheel" "$tools/src/mmcv-${MMCV_VERSION}"
    )
    mmcv_wheel="$(ls "$tools"/wheel/mmcv-${MMCV_VERSION}-*.whl | head -n1)"
    if [[ -n "${MMCV_WHEEL_OUT:-}" ]]; then
      mkdir -p "$MMCV_WHEEL_OUT" && cp "$mmcv_wheel" "$MMCV_WHEEL_OUT/"
    fi
  else
    log "reusing $mmcv_wheel"
  fi
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target "$site" "$mmcv_wheel"
  PYTHONPATH="$site:$ROOT" "$py" -c "import torch, mmcv.ops, sapiens_mm; print('[gpu_stack] sapiens_mm', sapiens_mm.__version__, 'imports fine with torch', torch.__version__, 'and mmcv', mmcv.__version__)"
  log "done in $(( SECONDS - start )) s; use: export PYTHONPATH=$site:$ROOT"
}

case "$CMD" in
  pack) pack ;;
  install) install ;;
  *) die "usage: bash tools/analysis/gpu_stack.sh pack|install [DIR]" ;;
esac
