from .loading import (CheckpointTypeError, TrustedTypeError,
                      add_trusted_types, check_finite, get_state_dict,
                      load_backbone_checkpoint, load_checkpoint, load_file,
                      load_state_dict, non_finite_tensors,
                      register_mmengine_loader, trusted_types)

__all__ = [
    'CheckpointTypeError', 'TrustedTypeError', 'add_trusted_types',
    'trusted_types', 'load_file', 'get_state_dict', 'load_state_dict',
    'check_finite', 'non_finite_tensors', 'load_checkpoint',
    'load_backbone_checkpoint', 'register_mmengine_loader'
]
from .convert import (convert_pretrain_to_clean,  # noqa: E402
                      extract_backbone_state_dict)

__all__ += ['convert_pretrain_to_clean', 'extract_backbone_state_dict']
