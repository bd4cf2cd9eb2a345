"""The model zoo: the released Sapiens / Sapiens2 models, their shipped
configs, and recognition of checkpoint files by name or by weights."""
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
    'recognize_checkpoint', 'with_official_dataset_meta'
]
