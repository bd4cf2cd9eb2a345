"""Install sapiens_mm, the OpenMMLab plugin for Sapiens human vision models.

Use ``tools/setup_env.sh`` (or ``make test`` / ``make demo``) for a full set-up:
mmcv 2.1.0 and mmpose need special install steps that ``pip install .`` alone
cannot express (see requirements.txt).

The configs ship inside the package (OpenMMLab's ``.mim`` convention): a
wheel or a regular install gets a copy of ``configs/`` as
``sapiens_mm/.mim/configs``, made in the build folder (never in the source
tree). An editable install (``pip install -e .``) reads ``configs/`` of the
checkout directly. See :func:`sapiens_mm.apis.model_zoo.config_root`.
"""
import re
import shutil
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).parent
VERSION = re.search(r"__version__ = '([^']+)'",
                    (HERE / 'sapiens_mm' / 'version.py').read_text()).group(1)


class BuildPyWithConfigs(build_py):
    """``build_py`` that also copies ``configs/`` (``*.py``) into the built
    package as ``sapiens_mm/.mim/configs``."""

    def run(self):
        super().run()
        if getattr(self, 'editable_mode', False):
            return  # the checkout's configs/ are used in place
        target = Path(self.build_lib) / 'sapiens_mm' / '.mim' / 'configs'
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(HERE / 'configs', target,
                        ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))

setup(
    name='sapiens_mm',
    version=VERSION,
    description='OpenMMLab plugin suite for Sapiens human vision models',
    long_description=(HERE / 'README.md').read_text(),
    long_description_content_type='text/markdown',
    packages=find_packages(include=['sapiens_mm', 'sapiens_mm.*']),
    package_data={'sapiens_mm': ['data/*.json', 'data/*.png', 'data/*.jpg',
                               'utils/csrc/*.c']},
    include_package_data=True,
    python_requires='>=3.10',
    install_requires=[
        'torch>=2.6', 'numpy<2', 'mmengine>=0.10.4,<0.11', 'mmcv>=2.1.0,<2.2.0',
        'mmpretrain>=1.2.0,<1.3', 'mmsegmentation>=1.2.2,<1.3', 'mmpose>=1.3.2,<1.4',
        'safetensors>=0.4',
    ],
    zip_safe=False,
    cmdclass={'build_py': BuildPyWithConfigs},
)
