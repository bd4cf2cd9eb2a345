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
    cmdclass={'build_py': BuildPyWithConfigs},
)
