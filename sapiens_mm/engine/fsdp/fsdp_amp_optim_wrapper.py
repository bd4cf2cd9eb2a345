"""Mixed-precision optim wrapper for FSDP training."""
from mmengine.optim import AmpOptimWrapper
from mmengine.registry import OPTIM_WRAPPERS

from .fsdp_clip_grad_mixin import FSDPClipGradMixin

__all__ = ['FSDPAmpOptimWrapper']


@OPTIM_WRAPPERS.register_module()
class FSDPAmpOptimWrapper(FSDPClipGradMixin, AmpOptimWrapper):
    """``AmpOptimWrapper`` (autocast; use ``dtype='bfloat16'``) whose
    ``clip_grad`` uses the global gradient norm of an FSDP model (see
    :class:`FSDPClipGradMixin`). ``use_fsdp`` defaults to True (sharded
    loss scaler). Needs a GPU, like ``AmpOptimWrapper``."""

    def __init__(self, *args, use_fsdp: bool = True, **kwargs) -> None:
        super().__init__(*args, use_fsdp=use_fsdp, **kwargs)
