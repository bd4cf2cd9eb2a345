"""Install sapiens_mm, the OpenMMLab plugin for Sapiens human vision models.

Use ``tools/setup_env.sh`` (or ``make test`` / ``make demo``) for a full set-up:
mmcv 2.1.0 and mmpose need special install steps that ``pip install .`` alone
cannot express (see requirements.txt).

The configs and the model registry ship inside the package (OpenMMLab's
``.mim`` convention, which ``mim download`` reads): a wheel or a regular
install gets a copy of ``configs/`` (with the ``metafile.yml`` files) as
``sapiens_mm/.mim/configs`` and of ``model-index.yml`` as
``sapiens_mm/.mim/model-index.yml``, made in the build folder (never in the
source tree). An editable install (``pip install -e .``) reads the
checkout's files directly. See :mod:`sapiens_mm.zoo.cards`.

The CPU kernels (``sapiens_mm/utils/csrc``, plain C for x86-64 with
AVX-512) are built here as the extension module
``sapiens_mm.utils._cpu_kernels``, beside the package's Python files (in
place for an editable install); no PyTorch headers, about two seconds. The
extension is optional: without a C compiler (or on another platform) the
install goes on and the package runs PyTorch's ops instead (it says so
once). See ``docs/design.md`` (CPU kernels).
"""
import glob
import importlib.util
import os
import re
import shutil
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = Path(__file__).parent
VERSION = re.search(r"__version__ = '([^']+)'",
                    (HERE / 'sapiens_mm' / 'version.py').read_text()).group(1)


class BuildPyWithConfigs(build_py):
    """``build_py`` that also copies ``configs/`` (configs and metafiles)
    and ``model-index.yml`` into the built package under
    ``sapiens_mm/.mim/``."""

    def run(self):
        super().run()
        if getattr(self, 'editable_mode', False):
            return  # the checkout's configs/ are used in place
        target = Path(self.build_lib) / 'sapiens_mm' / '.mim' / 'configs'
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(HERE / 'configs', target,
                        ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))
        shutil.copy2(HERE / 'model-index.yml', target.parent)


def _kernel_build_spec():
    """``sapiens_mm/utils/cpu_kernels_build.py`` (what the kernels are
    built from and how), loaded by path: the package cannot be imported
    before its dependencies are installed."""
    spec = importlib.util.spec_from_file_location(
        'cpu_kernels_build',
        HERE / 'sapiens_mm' / 'utils' / 'cpu_kernels_build.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


KERNELS = _kernel_build_spec()


class BuildKernels(build_ext):
    """``build_ext`` whose libraries appear whole or not at all: each is
    linked (and, for an in-place or editable build, copied into the
    package) under a temporary name beside its target, then renamed over
    it. Temporary files left by a killed build are removed first; the
    kernels are always rebuilt (about two seconds), so a library cut short
    by a kill is never kept as up to date."""

    _output = None

    def build_extension(self, ext):
        final = self.get_ext_fullpath(ext.name)
        _remove_leftovers(final)
        os.makedirs(os.path.dirname(final) or '.', exist_ok=True)
        self._output = f'{final}.tmp{os.getpid()}'
        self.force = True
        try:
            super().build_extension(ext)
            os.replace(self._output, final)
        finally:
            if os.path.exists(self._output):
                os.remove(self._output)
            self._output = None

    def get_ext_fullpath(self, ext_name):
        if self._output is not None:
            return self._output
        return super().get_ext_fullpath(ext_name)

    def copy_file(self, infile, outfile, *args, **kwargs):
        if not str(infile).endswith(self.get_ext_filename(KERNELS.EXTENSION)):
            return super().copy_file(infile, outfile, *args, **kwargs)
        outfile = str(outfile)
        _remove_leftovers(outfile)
        tmp = f'{outfile}.tmp{os.getpid()}'
        try:
            result = super().copy_file(infile, tmp, *args, **kwargs)
            os.replace(tmp, outfile)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        return (outfile, ) + tuple(result[1:])


def _remove_leftovers(path):
    """Delete the ``<path>.tmp<pid>`` files of builds that were killed
    (those of a build still running are its own)."""
    for leftover in glob.glob(glob.escape(path) + '.tmp*'):
        pid = re.fullmatch(r'\.tmp(\d+)', leftover[len(path):])
        if pid and not _running(int(pid.group(1))):
            os.remove(leftover)


def _running(pid):
    """Whether process ``pid`` exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass  # exists, owned by someone else
    return True


def kernel_extensions():
    """The CPU kernels' extension where this platform builds them."""
    if not KERNELS.buildable():
        return []
    c_files, headers = KERNELS.sources()
    return [
        Extension(
            KERNELS.EXTENSION,
            sources=[os.path.relpath(p, HERE) for p in c_files],
            depends=[os.path.relpath(p, HERE) for p in headers],
            define_macros=[('SAPIENS_KERNELS_SOURCES',
                            f'"{KERNELS.source_digest()}"')],
            extra_compile_args=list(KERNELS.COMPILE_ARGS),
            extra_link_args=list(KERNELS.LINK_ARGS),
            optional=True)
    ]


setup(
    name='sapiens_mm',
    version=VERSION,
    description='OpenMMLab plugin suite for Sapiens human vision models',
    long_description=(HERE / 'README.md').read_text(),
    long_description_content_type='text/markdown',
    packages=find_packages(include=['sapiens_mm', 'sapiens_mm.*']),
    package_data={'sapiens_mm': ['data/*.json', 'data/*.png', 'data/*.jpg',
                               'utils/csrc/*.c', 'utils/csrc/*.h']},
    include_package_data=True,
    python_requires='>=3.10',
    install_requires=[
        'torch>=2.6', 'numpy<2', 'mmengine>=0.10.4,<0.11', 'mmcv>=2.1.0,<2.2.0',
        'mmpretrain>=1.2.0,<1.3', 'mmsegmentation>=1.2.2,<1.3', 'mmpose>=1.3.2,<1.4',
        'safetensors>=0.4', 'huggingface_hub>=1.0', 'pyyaml',
    ],
    zip_safe=False,
    ext_modules=kernel_extensions(),
    cmdclass={'build_py': BuildPyWithConfigs, 'build_ext': BuildKernels},
)
