from .class_name_auto_wrap_policy import class_name_auto_wrap_policy
from .fsdp_amp_optim_wrapper import FSDPAmpOptimWrapper
from .fsdp_clip_grad_mixin import FSDPClipGradMixin
from .fsdp_optim_wrapper import FSDPOptimWrapper

__all__ = [
    'class_name_auto_wrap_policy', 'FSDPClipGradMixin', 'FSDPOptimWrapper',
    'FSDPAmpOptimWrapper'
]
