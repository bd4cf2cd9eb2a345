from .mae_reconstruction_hook import MAEReconstructionHook

__all__ = ['MAEReconstructionHook']
