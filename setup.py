"""Install sapiens_mm, the OpenMMLab plugin for Sapiens human vision models.

Use ``tools/setup_env.sh`` (or ``make test`` / ``make demo``) for a full set-up:
mmcv 2.1.0 and mmpose need special install steps that ``pip install .`` alone
cannot express (see requirements.txt).
"""
import re
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent
VERSION = re.search(r"__version__ = '([^']+)'",
                    (HERE / 'sapiens_mm' / 'version.py').read_text()).group(1)

setup(
    name='sapiens_mm',
    version=VERSION,
    description='OpenMMLab plugin suite for Sapiens human vision models',
    long_description=(HERE / 'README.md').read_text(),
    long_description_content_type='text/markdown',
    packages=find_packages(include=['sapiens_mm', 'sapiens_mm.*']),
    package_data={'sapiens_mm': ['data/*.json', 'data/*.png', 'data/*.jpg']},
    include_package_data=True,
    python_requires='>=3.10',
    install_requires=[
        'torch>=2.6', 'numpy<2', 'mmengine>=0.10.4,<0.11', 'mmcv>=2.1.0,<2.2.0',
        'mmpretrain>=1.2.0,<1.3', 'mmsegmentation>=1.2.2,<1.3', 'mmpose>=1.3.2,<1.4',
        'safetensors>=0.4',
    ],
    zip_safe=False,
)
