"""The model zoo: the released Sapiens / Sapiens2 models, their shipped
configs, recognition of checkpoint files by name or by weights, and the
config a checkpoint carries (:mod:`.config_match`)."""
from .config_match import (ConfigMismatchError, checkpoint_config,
                           config_mismatches)
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
    'recognize_checkpoint', 'with_official_dataset_meta',
    'ConfigMismatchError', 'checkpoint_config', 'config_mismatches'
]
