"""How the CPU kernels of ``csrc/`` are built: read by ``setup.py`` (which
loads this file by its path, before the package can be imported) and by
:mod:`sapiens_mm.utils.cpu_kernels` (which checks that the library it
loads was built from the sources beside it).

Standard library only: ``setup.py`` runs it without PyTorch or the
package's dependencies.
"""
import glob
import hashlib
import os.path as osp
import platform
import sys
from typing import List, Tuple

#: The extension module setuptools builds (a shared library that
#: :mod:`sapiens_mm.utils.cpu_kernels` loads with ctypes).
EXTENSION = 'sapiens_mm.utils._cpu_kernels'
#: The folder of the C sources and headers.
SOURCE_DIR = osp.join(osp.dirname(osp.abspath(__file__)), 'csrc')
#: Compiler flags: the instruction sets the kernels are written for
#: (AVX-512 F/BW/DQ/VL, AVX512_BF16, FMA: checked at run time by
#: :func:`sapiens_mm.utils.cpu_features.cpu_kernels_supported`) and OpenMP
#: (the parallel loops run on PyTorch's OpenMP threads, ``csrc/parallel.h``).
COMPILE_ARGS = ('-O3', '-std=gnu11', '-mavx512f', '-mavx512bw', '-mavx512dq',
                '-mavx512vl', '-mavx512bf16', '-mfma', '-fopenmp')
#: Linker flags: the GNU OpenMP runtime by its soname (libgomp.so.1, the one
#: PyTorch's Linux builds load: in the process the two are one library).
LINK_ARGS = ('-fopenmp', '-lm')


def buildable() -> bool:
    """Whether this platform builds the kernels: Linux on x86-64 (the
    intrinsics are x86's; elsewhere PyTorch's ops run)."""
    return (sys.platform.startswith('linux')
            and platform.machine().lower() in ('x86_64', 'amd64'))


def sources(source_dir: str = SOURCE_DIR) -> Tuple[List[str], List[str]]:
    """``(C files, headers)`` of ``source_dir``, sorted."""
    return (sorted(glob.glob(osp.join(source_dir, '*.c'))),
            sorted(glob.glob(osp.join(source_dir, '*.h'))))


def source_digest(source_dir: str = SOURCE_DIR) -> str:
    """A digest of the kernels' sources and headers (names and contents)
    and of the compiler flags: built into the library, compared with the
    sources beside it before it is used."""
    digest = hashlib.sha256(' '.join(COMPILE_ARGS + LINK_ARGS).encode())
    c_files, headers = sources(source_dir)
    for path in sorted(c_files + headers, key=osp.basename):
        with open(path, 'rb') as f:
            data = f.read()
        digest.update(f'{osp.basename(path)}:{len(data)}:'.encode() + data)
    return digest.hexdigest()[:32]
