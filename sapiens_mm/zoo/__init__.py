"""The model zoo: the released Sapiens / Sapiens2 models (the registry read
from the metafiles, :mod:`.cards`), their downloads from the Hugging Face
Hub (:mod:`.hub`), their shipped configs, recognition of checkpoint files by
name or by weights (:mod:`.model_zoo`), the config a checkpoint carries
(:mod:`.config_match`), and mmengine's checkpoint schemes (:mod:`.loader`:
``hf://``, fetched once per node in distributed jobs by :mod:`.dist_fetch`,
and local files inside :func:`safe_checkpoint_loading`).

The registry (:mod:`.cards`: YAML and the standard library) is imported
with the package; the other modules, which need torch, when one of their
names is first used, so that a command line can check model names before
torch loads.
"""
import importlib

from .cards import (
                    ModelCard,
                    UnknownModelError,
                    add_model_index,
                    find_card,
                    lookup_card,
                    model_cards,
)

#: The names of the modules that need torch, by module.
_LAZY = {
    'config_match': ('ConfigMismatchError', 'checkpoint_config',
                     'config_mismatches'),
    'dist_fetch': ('fetch_url_on_nodes', ),
    'loader': ('safe_checkpoint_loading', ),
    'hub': ('CorruptDownloadError', 'GatedModelError', 'HubAnswerError',
            'HubError', 'HubLimits', 'HubTimeoutError',
            'ModelFileMissingError', 'NotCachedError', 'fetch', 'fetch_url',
            'resolve_checkpoint'),
    'model_zoo': ('EMBED_DIMS_TO_SIZE', 'SAPIENS2_EMBED_DIMS_TO_SIZE',
                  'SapiensModelInfo', 'UnrecognizedCheckpointError',
                  'config_path', 'config_root', 'get_config',
                  'parse_checkpoint_name', 'recognize_checkpoint',
                  'recognize_state_dict', 'shipped_config',
                  'with_official_dataset_meta'),
}
_MODULE_OF = {name: module for module, names in _LAZY.items()
              for name in names}


def __getattr__(name: str):
    if name not in _MODULE_OF:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    value = getattr(importlib.import_module(f'.{_MODULE_OF[name]}', __name__),
                    name)
    globals()[name] = value
    return value


__all__ = [
    'ModelCard', 'UnknownModelError', 'add_model_index', 'find_card',
    'lookup_card', 'model_cards', *_MODULE_OF
]
