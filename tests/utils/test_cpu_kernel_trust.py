"""Which kernel library sapiens_mm loads (sapiens_mm.utils.cpu_kernels): only
the one installed beside its Python files, and only when it is as trusted as
they are. A planted library (another user's, a group-writable one, a link,
one in a shared cache folder) never runs its code: its constructor would
write a marker file, which must never appear; one log line says why.

The planted libraries are built here with the system C compiler; the
other-user cases need root (chown), which CI has.
"""
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from log_helpers import logged_warnings

from sapiens_mm.utils import cpu_kernels

needs_cc = pytest.mark.skipif(shutil.which('cc') is None,
                              reason='needs a C compiler to build the '
                              'planted library')
needs_root = pytest.mark.skipif(os.getuid() != 0,
                                reason='needs root to plant a file of '
                                'another user')
OTHER_UID = 12345


def _planted(folder: Path, marker: Path, name: str = 'planted.so') -> Path:
    """A shared library whose constructor writes ``marker`` when loaded
    (and which exports the kernels' names, as a real attack would)."""
    src = folder / 'planted.c'
    src.write_text(textwrap.dedent(f'''
        #include <stdio.h>
        __attribute__((constructor)) static void planted(void) {{
            FILE *f = fopen("{marker}", "w");
            if (f) {{ fputs("planted code ran", f); fclose(f); }}
        }}
        const char *sapiens_kernels_sources(void) {{ return "planted"; }}
        int sapiens_attention_bf16(void) {{ return 0; }}
        '''))
    lib = folder / name
    subprocess.run(['cc', '-shared', '-fPIC', str(src), '-o', str(lib)],
                   check=True, capture_output=True, timeout=60)
    src.unlink()
    return lib


@pytest.fixture
def reference(tmp_path):
    """A stand-in for the package's own Python file: root's (or yours),
    0644."""
    ref = tmp_path / 'cpu_kernels.py'
    ref.write_text('# the package file\n')
    ref.chmod(0o644)
    return ref


@needs_cc
@needs_root
def test_library_of_another_user_never_runs(tmp_path, reference):
    marker = tmp_path / 'marker'
    lib = _planted(tmp_path, marker)
    lib.chmod(0o755)
    os.chown(lib, OTHER_UID, OTHER_UID)
    with logged_warnings() as lines:
        assert cpu_kernels.load_library(str(lib), str(reference)) is None
    assert not marker.exists()
    assert len(lines) == 1 and f'owned by uid {OTHER_UID}' in lines[0]
    # The same file once it is root's: it is loaded (the marker appears,
    # so the check above is what kept it out), then refused because it was
    # not built from the package's sources.
    os.chown(lib, 0, 0)
    with logged_warnings() as lines:
        assert cpu_kernels.load_library(str(lib), str(reference)) is None
    assert marker.read_text() == 'planted code ran'
    assert len(lines) == 1 and 'built from other sources' in lines[0]


@needs_cc
def test_writable_or_linked_library_never_runs(tmp_path, reference):
    marker = tmp_path / 'marker'
    lib = _planted(tmp_path, marker)
    for mode, why in ((0o775, 'writable by group'),
                      (0o757, 'writable by others'),
                      (0o777, 'writable by group and others')):
        lib.chmod(mode)
        with logged_warnings() as lines:
            assert cpu_kernels.load_library(str(lib), str(reference)) is None
        assert len(lines) == 1 and why in lines[0], lines
    lib.chmod(0o755)
    link = tmp_path / 'link.so'
    link.symlink_to(lib)
    with logged_warnings() as lines:
        assert cpu_kernels.load_library(str(link), str(reference)) is None
    assert len(lines) == 1 and 'not a regular file' in lines[0]
    assert not marker.exists()


@needs_cc
@pytest.mark.skipif(not cpu_kernels.cpu_kernels_supported(),
                    reason='needs a CPU with AVX512_BF16')
def test_cache_folders_are_never_consulted(tmp_path):
    """Libraries planted under every cache folder a user or attacker might
    point at (SAPIENS_MM_CACHE at a shared world-writable folder,
    XDG_CACHE_HOME, ~/.cache), under the names a runtime build used and
    the extension's own name, by another user where possible: a process
    using all three kernels loads the package's library only."""
    marker = tmp_path / 'marker'
    names = ['sapiens_cpu_kernels-0123456789abcdef.so',
             Path(cpu_kernels.cpu_kernels_path()).name]
    env = dict(os.environ, SAPIENS_MM_CACHE=str(tmp_path / 'shared'),
               XDG_CACHE_HOME=str(tmp_path / 'xdg'),
               HOME=str(tmp_path / 'home'))
    for base in (tmp_path / 'shared', tmp_path / 'xdg' / 'sapiens_mm',
                 tmp_path / 'home' / '.cache' / 'sapiens_mm'):
        folder = base / 'kernels'
        folder.mkdir(parents=True)
        for name in names:
            lib = _planted(folder, marker, name)
            if os.getuid() == 0:
                os.chown(lib, OTHER_UID, OTHER_UID)
        for f in (folder, base):
            f.chmod(0o777)
    code = textwrap.dedent('''
        import torch
        from sapiens_mm.models.layers import RMSNorm, apply_rope
        from sapiens_mm.models.layers import RopePositionEmbedding
        from sapiens_mm.utils import cpu_kernels, sdpa
        q = torch.randn(1, 2, 24, 64).bfloat16()
        with torch.inference_mode():
            sdpa.scaled_dot_product_attention(q, q, q)
            RMSNorm(64, eps=1e-6).bfloat16()(q)
            apply_rope(q, q, RopePositionEmbedding(64)(4, 6))
        print(cpu_kernels.cpu_kernels_path(), cpu_kernels.cpu_kernel(
            'sapiens_attention_bf16') is not None)
        ''')
    proc = subprocess.run([sys.executable, '-c', code], env=env,
                          cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    path, used = proc.stdout.split()
    assert used == 'True'
    assert Path(path).parent == Path(cpu_kernels.__file__).parent
    assert not marker.exists()


def test_missing_library_runs_pytorchs_ops_and_says_so_once(tmp_path):
    """No library (installed without a compiler, a checkout not built) on
    a CPU that could run it: attention runs PyTorch's kernel with its
    values, and the log says once how to build the kernels."""
    code = textwrap.dedent(f'''
        import torch
        import torch.nn.functional as F
        from sapiens_mm.utils import cpu_kernels, sdpa
        cpu_kernels.cpu_kernels_path = lambda: {str(tmp_path / 'none.so')!r}
        q = torch.randn(1, 2, 24, 64)
        with torch.inference_mode():
            for _ in range(3):
                out = sdpa.scaled_dot_product_attention(q, q, q)
        assert torch.equal(out, F.scaled_dot_product_attention(q, q, q))
        print(cpu_kernels.cpu_kernel('sapiens_attention_f32'))
        ''')
    proc = subprocess.run([sys.executable, '-c', code], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == 'None'
    log = proc.stdout + proc.stderr
    if cpu_kernels.cpu_kernels_supported():
        assert log.count('The CPU kernels are not built') == 1
        assert 'pip install -e .' in log
    else:
        assert log.count("lacks the C kernels' instructions") == 1
