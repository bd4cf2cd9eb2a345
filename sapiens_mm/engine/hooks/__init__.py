from .non_finite_loss_hook import NonFiniteLossHook
from .reseed_hook import ReseedHook

__all__ = ['NonFiniteLossHook', 'ReseedHook']
from .mae_reconstruction_hook import MAEReconstructionHook  # noqa: E402

__all__ += ['MAEReconstructionHook']
