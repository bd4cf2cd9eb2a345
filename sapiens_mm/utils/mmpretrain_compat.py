"""mmpretrain 1.2 beside Hugging Face Transformers 5.

mmpretrain 1.2 decides once, at import, whether to load its multimodal
models (BLIP, BLIP-2, Flamingo, LLaVA, MiniGPT-4, OFA, CLIP, RAM...): the
flag ``mmpretrain.utils.dependency.WITH_MULTIMODAL`` is True when
``transformers >= 4.28`` and ``pycocotools`` are installed, and
``mmpretrain.models`` / ``mmpretrain.datasets`` read it when they are first
imported. Those models subclass Transformers 4 classes that Transformers 5
removed, so with Transformers 5 installed ``import mmpretrain.models`` (and
with it ``import sapiens_mm``, mmpose and mmseg's mmpretrain backbones)
fails with ``TypeError: NoneType takes no arguments``.

sapiens_mm uses none of the multimodal models. :func:`keep_multimodal_off`
sets the flag to False before mmpretrain's model and dataset packages are
imported, when the installed Transformers is 5 or later: mmpretrain then
registers its placeholders for those models (building one says which extra
to install), exactly as when Transformers is absent. Installed files are
not touched; with Transformers 4 nothing changes. ``import sapiens_mm``
calls it first thing; import sapiens_mm before ``mmpretrain.models``.
"""
import sys
from importlib import metadata

from packaging.version import Version

__all__ = ['keep_multimodal_off', 'transformers_major']


def transformers_major() -> int:
    """Major version of the installed Transformers (0 when absent), read
    from its metadata: Transformers itself is not imported."""
    try:
        return Version(metadata.version('transformers')).major
    except (metadata.PackageNotFoundError, ValueError):
        return 0


def keep_multimodal_off() -> bool:
    """Keep mmpretrain's multimodal models off when Transformers >= 5 is
    installed (see the module docstring).

    Returns:
        Whether the flag was set: False with Transformers < 5 or absent, and
        when ``mmpretrain.models`` / ``mmpretrain.datasets`` were imported
        already (too late to change; their import then worked or failed on
        its own).
    """
    if transformers_major() < 5:
        return False
    if 'mmpretrain.models' in sys.modules or \
            'mmpretrain.datasets' in sys.modules:
        return False
    from mmpretrain.utils import dependency
    dependency.WITH_MULTIMODAL = False
    return True
