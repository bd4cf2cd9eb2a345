"""The model zoo: the released Sapiens / Sapiens2 models (the registry read
from the metafiles, :mod:`.cards`), their downloads from the Hugging Face
Hub (:mod:`.hub`), their shipped configs, recognition of checkpoint files by
name or by weights (:mod:`.model_zoo`), the config a checkpoint carries
(:mod:`.config_match`), and mmengine's checkpoint schemes (:mod:`.loader`:
``hf://``, and local files inside :func:`safe_checkpoint_loading`)."""
from .cards import (
                    ModelCard,
                    UnknownModelError,
                    add_model_index,
                    find_card,
                    lookup_card,
                    model_cards,
)
from .config_match import (ConfigMismatchError, checkpoint_config,
                           config_mismatches)
from .hub import (
                    CorruptDownloadError,
                    GatedModelError,
                    HubError,
                    ModelFileMissingError,
                    NotCachedError,
                    fetch,
                    fetch_url,
                    resolve_checkpoint,
)
from .loader import safe_checkpoint_loading
from .model_zoo import (
                    EMBED_DIMS_TO_SIZE,
                    SAPIENS2_EMBED_DIMS_TO_SIZE,
                    SapiensModelInfo,
                    UnrecognizedCheckpointError,
                    config_path,
                    config_root,
                    get_config,
                    parse_checkpoint_name,
                    recognize_checkpoint,
                    recognize_state_dict,
                    shipped_config,
                    with_official_dataset_meta,
)

__all__ = [
    'SapiensModelInfo', 'UnrecognizedCheckpointError', 'EMBED_DIMS_TO_SIZE',
    'SAPIENS2_EMBED_DIMS_TO_SIZE', 'config_root', 'config_path', 'get_config',
    'shipped_config', 'parse_checkpoint_name', 'recognize_state_dict',
    'recognize_checkpoint', 'with_official_dataset_meta', 'ModelCard',
    'UnknownModelError', 'add_model_index', 'find_card', 'lookup_card',
    'model_cards', 'HubError', 'GatedModelError', 'ModelFileMissingError',
    'NotCachedError', 'CorruptDownloadError', 'fetch', 'fetch_url',
    'resolve_checkpoint', 'ConfigMismatchError', 'checkpoint_config',
    'config_mismatches', 'safe_checkpoint_loading'
]
