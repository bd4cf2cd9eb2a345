"""fp32 optim wrapper for FSDP training."""
from mmengine.optim import OptimWrapper
from mmengine.registry import OPTIM_WRAPPERS

from .fsdp_clip_grad_mixin import FSDPClipGradMixin

__all__ = ['FSDPOptimWrapper']


@OPTIM_WRAPPERS.register_module()
class FSDPOptimWrapper(FSDPClipGradMixin, OptimWrapper):
    """``OptimWrapper`` whose ``clip_grad`` uses the global gradient norm
    of an FSDP model (see :class:`FSDPClipGradMixin`). Same arguments as
    ``OptimWrapper``; ``tools/train.py`` picks it for FSDP configs."""
