from .loading import (CheckpointTypeError, TrustedTypeError,
                      add_trusted_types, check_finite, get_state_dict,
                      load_backbone_checkpoint, load_checkpoint, load_file,
                      load_state_dict, non_finite_tensors, read_checkpoint,
                      trusted_types)

__all__ = [
    'CheckpointTypeError', 'TrustedTypeError', 'add_trusted_types',
    'trusted_types', 'load_file', 'get_state_dict', 'load_state_dict',
    'check_finite', 'non_finite_tensors', 'load_checkpoint',
    'read_checkpoint', 'load_backbone_checkpoint'
]
from .convert import (convert_pretrain_to_clean,  # noqa: E402
                      extract_backbone_state_dict)

__all__ += ['convert_pretrain_to_clean', 'extract_backbone_state_dict']
from .safetensors_io import (is_safetensors_file,  # noqa: E402
                             load_safetensors, save_safetensors)
from .sapiens2_layout import (add_official_layout_hook,  # noqa: E402
                              from_official_layout, official_head_keys,
                              save_official_checkpoint, to_official_layout)
from .transformers_layout import (  # noqa: E402
    from_transformers_layout, is_transformers_folder,
    is_transformers_state_dict, load_transformers_checkpoint,
    save_transformers_checkpoint, to_transformers_layout)

__all__ += [
    'is_safetensors_file', 'load_safetensors', 'save_safetensors',
    'from_official_layout', 'to_official_layout', 'save_official_checkpoint',
    'add_official_layout_hook', 'official_head_keys',
    'from_transformers_layout', 'to_transformers_layout',
    'is_transformers_folder', 'is_transformers_state_dict',
    'load_transformers_checkpoint', 'save_transformers_checkpoint'
]
