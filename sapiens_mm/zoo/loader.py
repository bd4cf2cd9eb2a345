"""mmengine checkpoint schemes of the model registry.

``import sapiens_mm`` adds one scheme to mmengine's ``CheckpointLoader``
(:func:`register_mmengine_loaders`):

- ``hf://<org>/<repo>[@<revision>]/<file>`` and ``hf://<registry name>``
  through the Hugging Face cache (:mod:`sapiens_mm.zoo.hub`), so Runner
  ``load_from``, ``init_cfg=dict(type='Pretrained', checkpoint=...)`` and
  the stock mmpose / mmseg ``init_model`` take Hub files. In a distributed
  job each node's local rank 0 downloads into its node's cache while the
  node's other ranks wait, then read it; an error on any rank reaches every
  rank as the same line, and no rank waits without end
  (:mod:`sapiens_mm.zoo.dist_fetch`). No other library registers this
  prefix.

mmengine's loader of local paths (the ``''`` prefix) stays mmengine's: a
checkpoint any other library loads in the process reads as it would
without sapiens_mm. :func:`safe_checkpoint_loading` routes local paths
through :func:`load_local` (sapiens_mm's safe reader: ``.safetensors``,
Runner checkpoints with numpy and mmengine objects in their meta, the
``dataset_meta`` an official Sapiens task checkpoint lacks) for the code
run inside it: ``tools/train.py`` and ``tools/test.py`` run their Runner
there.

:mod:`sapiens_mm.checkpoint` itself knows nothing of the registry: it turns
files into state dicts.
"""
import contextlib
from typing import Any, Iterator

from mmengine.logging import print_log
from mmengine.runner.checkpoint import CheckpointLoader

from sapiens_mm.checkpoint import load_file

from .model_zoo import with_official_dataset_meta

__all__ = ['load_local', 'load_hub', 'register_mmengine_loaders',
           'safe_checkpoint_loading']

HF_PREFIX = 'hf://'


def load_local(filename: str, map_location: Any = None) -> Any:
    """Read a local checkpoint safely; an official Sapiens task checkpoint
    also gets its ``dataset_meta`` (see
    :func:`sapiens_mm.zoo.model_zoo.with_official_dataset_meta`)."""
    return with_official_dataset_meta(filename,
                                      load_file(filename, map_location))


def load_hub(filename: str, map_location: Any = None) -> Any:
    """mmengine scheme ``hf://``: the file from the Hugging Face cache,
    downloaded once per node (see
    :func:`sapiens_mm.zoo.dist_fetch.fetch_url_on_nodes`)."""
    from .dist_fetch import fetch_url_on_nodes
    return load_local(fetch_url_on_nodes(filename), map_location)


def register_mmengine_loaders() -> None:
    """Add the ``hf://`` scheme (:func:`load_hub`) to mmengine's
    ``CheckpointLoader``; called on ``import sapiens_mm``. A prefix already
    taken by another loader is left to it (logged). Local paths keep
    mmengine's own loader (see :func:`safe_checkpoint_loading`)."""
    current = CheckpointLoader._schemes.get(HF_PREFIX)
    if current is None:
        CheckpointLoader.register_scheme(prefixes=HF_PREFIX, loader=load_hub)
    elif current is not load_hub:
        print_log(f'mmengine checkpoint scheme {HF_PREFIX!r} is already '
                  f'registered ({getattr(current, "__qualname__", current)}); '
                  'sapiens_mm leaves it.', logger='current', level=30)


@contextlib.contextmanager
def safe_checkpoint_loading() -> Iterator[None]:
    """Inside the block, mmengine's ``CheckpointLoader`` reads local paths
    through :func:`load_local` (the Runner's ``load_from`` / ``resume``,
    ``Pretrained`` init, stock front ends such as ``mmseg.apis.init_model``
    or ``MMSegInferencer``); on exit the loader that was registered before
    is back.

    mmengine's loader registry is process-wide: a thread that loads a local
    checkpoint while the block runs reads it through :func:`load_local`
    too.

    Example:
        >>> with safe_checkpoint_loading():
        ...     runner.train()  # resumes from a Runner checkpoint
    """
    previous = CheckpointLoader._schemes.get('')
    CheckpointLoader.register_scheme(prefixes='', loader=load_local,
                                     force=True)
    try:
        yield
    finally:
        if previous is None:
            CheckpointLoader._schemes.pop('', None)
        else:
            CheckpointLoader.register_scheme(prefixes='', loader=previous,
                                             force=True)
