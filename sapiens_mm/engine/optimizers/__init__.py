from .layer_decay_optim_wrapper_constructor import (
    SapiensLayerDecayOptimWrapperConstructor, get_layer_id, is_no_decay)

__all__ = [
    'SapiensLayerDecayOptimWrapperConstructor', 'get_layer_id', 'is_no_decay'
]
