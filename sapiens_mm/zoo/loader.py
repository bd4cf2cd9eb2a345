"""mmengine checkpoint schemes of the model registry.

:func:`register_mmengine_loaders` (called by ``import sapiens_mm``) makes
mmengine's ``CheckpointLoader`` (Runner ``load_from`` / ``resume``,
``init_cfg=dict(type='Pretrained', checkpoint=...)``, the stock mmpose /
mmseg ``init_model``) read:

- local paths through :func:`sapiens_mm.checkpoint.load_file` (the safe
  loader), adding the ``dataset_meta`` an official Sapiens task checkpoint
  lacks (:func:`with_official_dataset_meta`);
- ``hf://<org>/<repo>[@<revision>]/<file>`` and ``hf://<registry name>``
  through the Hugging Face cache (:mod:`sapiens_mm.zoo.hub`). In a
  distributed job each node's local rank 0 downloads into its node's cache
  while the node's other ranks wait, then read it; an error on any rank
  reaches every rank as the same line, and no rank waits without end
  (:mod:`sapiens_mm.zoo.dist_fetch`).

:mod:`sapiens_mm.checkpoint` itself knows nothing of the registry: it turns
files into state dicts.
"""
from typing import Any

from mmengine.runner.checkpoint import CheckpointLoader

from sapiens_mm.checkpoint import load_file

from .model_zoo import with_official_dataset_meta

__all__ = ['load_local', 'load_hub', 'register_mmengine_loaders']

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
    """Route mmengine's local-file and ``hf://`` checkpoint loading through
    :func:`load_local` and :func:`load_hub`."""
    CheckpointLoader.register_scheme(prefixes='', force=True)(load_local)
    CheckpointLoader.register_scheme(prefixes=HF_PREFIX,
                                     force=True)(load_hub)
