"""sapiens_mm: OpenMMLab plugin suite for Sapiens human vision models.

``import sapiens_mm`` checks the installed OpenMMLab stack, keeps
mmpretrain's multimodal models off when Transformers 5 is installed (they do
not import under it; see :mod:`sapiens_mm.utils.mmpretrain_compat`), then
registers every module it provides into the upstream registries
(mmpretrain, mmpose, mmseg, mmengine) and routes mmengine's checkpoint
loading (local files and ``hf://`` Hub files) through the safe loader in
:mod:`sapiens_mm.checkpoint` (see :mod:`sapiens_mm.zoo.loader`).
"""
from .utils.mmpretrain_compat import keep_multimodal_off
from .utils.version_check import check_versions
from .version import __version__

check_versions()
keep_multimodal_off()

from . import checkpoint  # noqa: E402,F401
from . import codecs  # noqa: E402,F401
from . import datasets  # noqa: E402,F401
from . import engine  # noqa: E402,F401
from . import evaluation  # noqa: E402,F401
from . import models  # noqa: E402,F401
from .zoo.loader import register_mmengine_loaders  # noqa: E402

register_mmengine_loaders()


def get_config(name: str):
    """A shipped config by name, e.g.
    ``sapiens_mm.get_config('sapiens_0.3b-210e_goliath-1024x768')`` (see
    :func:`sapiens_mm.zoo.get_config`)."""
    from .zoo import get_config as zoo_get_config
    return zoo_get_config(name)


__all__ = ['__version__', 'get_config']
