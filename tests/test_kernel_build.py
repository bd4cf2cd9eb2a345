"""The CPU kernels' build (setup.py build_ext, what `pip install` and an
editable install run) on a copy of the sources: a `$CC` with arguments, a
build killed while it links (no library under the final name; its
leftover removed by the next build), and the library the next build gives:
built from these sources (the digest the package checks before using it).
"""
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.skipif(shutil.which('gcc') is None, reason='needs gcc'),
    pytest.mark.skipif(
        sys.platform != 'linux' or os.uname().machine != 'x86_64',
        reason='the kernels are built on x86-64 Linux only'),
]

# A compiler wrapper in the place of ccache: logs its command line, and
# with $HANG set, on the link step writes half a library and waits to be
# killed.
WRAPPER = r'''#!/bin/sh
echo "$*" >> "$WRAPPER_LOG"
case " $* " in
  *" -shared "*)
    if [ -n "$HANG" ]; then
      prev=""; out=""
      for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
      printf 'half a library' > "$out"
      touch "$HANG"
      sleep 600
    fi;;
esac
exec "$@"
'''


def _sources(tmp: Path) -> Path:
    """The files setup.py needs to build the kernels, copied."""
    src = tmp / 'src'
    for rel in ('setup.py', 'README.md', 'sapiens_mm/version.py',
                'sapiens_mm/utils/cpu_kernels_build.py'):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, src / rel)
    shutil.copytree(ROOT / 'sapiens_mm/utils/csrc',
                    src / 'sapiens_mm/utils/csrc')
    return src


def test_cc_with_arguments_killed_build_and_rebuild(tmp_path):
    src = _sources(tmp_path)
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    wrapper = bin_dir / 'ccache'
    wrapper.write_text(WRAPPER)
    wrapper.chmod(0o755)
    log = tmp_path / 'cc.log'
    env = dict(os.environ, CC='ccache gcc', WRAPPER_LOG=str(log),
               PATH=f'{bin_dir}{os.pathsep}{os.environ["PATH"]}')
    env.pop('LDSHARED', None)
    target = (src / 'sapiens_mm' / 'utils' /
              ('_cpu_kernels' + sysconfig.get_config_var('EXT_SUFFIX')))
    cmd = [sys.executable, 'setup.py', '-q', 'build_ext', '--inplace']

    # 1. killed while linking: nothing under the library's name
    hang = tmp_path / 'linking'
    proc = subprocess.Popen(cmd, cwd=src, env=dict(env, HANG=str(hang)),
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not hang.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not target.exists()
    leftovers = [p for p in src.rglob('_cpu_kernels*') if p.is_file()]
    assert leftovers and all('.tmp' in p.name for p in leftovers)

    # 2. the next build removes what the killed one left and links anew
    proc = subprocess.run(cmd, cwd=src, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [p for p in src.rglob('_cpu_kernels*') if p.is_file()
            and '.tmp' in p.name] == []
    # `ccache gcc` ran as a command with its argument, for every step
    lines = log.read_text().splitlines()
    assert lines and all(line.startswith('gcc ') for line in lines)
    assert any(' -shared ' in f' {line} ' for line in lines)

    # 3. the library: built from these sources, with the kernels' entry
    # points (loading it runs nothing: no constructors)
    lib = ctypes.CDLL(str(target))
    lib.sapiens_kernels_sources.restype = ctypes.c_char_p
    spec = subprocess.run(
        [sys.executable, '-c', 'import cpu_kernels_build as b; '
         'print(b.source_digest())'],
        cwd=src / 'sapiens_mm' / 'utils', capture_output=True, text=True,
        check=True, env={k: v for k, v in os.environ.items()
                         if k != 'PYTHONPATH'})
    assert lib.sapiens_kernels_sources().decode() == spec.stdout.strip()
    for name in ('sapiens_attention_bf16', 'sapiens_attention_f32',
                 'sapiens_rms_norm', 'sapiens_rope_bf16'):
        assert hasattr(lib, name)


def test_install_without_a_compiler_goes_on(tmp_path):
    """The extension is optional: with no usable compiler the build ends
    well, without a library (the package then runs PyTorch's ops)."""
    src = _sources(tmp_path)
    proc = subprocess.run(
        [sys.executable, 'setup.py', 'build_ext', '--inplace'], cwd=src,
        env=dict(os.environ, CC='no-such-compiler'), capture_output=True,
        text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert 'building extension "sapiens_mm.utils._cpu_kernels" failed' in (
        proc.stderr)
    assert not [p for p in src.rglob('_cpu_kernels*') if p.is_file()]
