from .loading import (CheckpointTypeError, add_trusted_types, get_state_dict,
                      load_backbone_checkpoint, load_checkpoint, load_file,
                      load_state_dict, register_mmengine_loader, trusted_types)

__all__ = [
    'CheckpointTypeError', 'add_trusted_types', 'trusted_types', 'load_file',
    'get_state_dict', 'load_state_dict', 'load_checkpoint',
    'load_backbone_checkpoint', 'register_mmengine_loader'
]
from .convert import (convert_pretrain_to_clean,  # noqa: E402
                      extract_backbone_state_dict)

__all__ += ['convert_pretrain_to_clean', 'extract_backbone_state_dict']
