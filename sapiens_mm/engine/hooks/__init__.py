from .best_checkpoint_guard_hook import RUN_ID_KEY, BestCheckpointGuardHook
from .config_data_hook import CONFIG_DATA_KEY, ConfigDataHook
from .inference_form_hook import InferenceFormHook
from .non_finite_loss_hook import NonFiniteLossHook
from .reseed_hook import ReseedHook
from .strict_load_hook import StrictLoadHook

__all__ = [
    'BestCheckpointGuardHook', 'RUN_ID_KEY', 'ConfigDataHook',
    'CONFIG_DATA_KEY', 'InferenceFormHook', 'NonFiniteLossHook',
    'ReseedHook',
    'StrictLoadHook'
]
from .mae_reconstruction_hook import MAEReconstructionHook  # noqa: E402

__all__ += ['MAEReconstructionHook']
