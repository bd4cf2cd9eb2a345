"""FSDP auto-wrap policy that can be written in a config file."""
from typing import Sequence

import torch.nn as nn
from mmengine.registry import FUNCTIONS

__all__ = ['class_name_auto_wrap_policy']


@FUNCTIONS.register_module()
def class_name_auto_wrap_policy(
        module: nn.Module,
        recurse: bool,
        nonwrapped_numel: int,
        class_names: Sequence[str] = ('TransformerEncoderLayer', )) -> bool:
    """Wrap every module whose class name is in ``class_names`` in its own
    FSDP unit.

    The same rule as PyTorch's ``ModuleWrapPolicy``, but with class *names*,
    so that it fits a config file (mmengine builds
    ``partial(policy, **kwargs)`` from the dict)::

        strategy = dict(
            type='FSDPStrategy',
            model_wrapper=dict(auto_wrap_policy=dict(
                type='class_name_auto_wrap_policy',
                class_names=['TransformerEncoderLayer'])))

    One unit per Sapiens encoder layer means one layer's full parameters
    are gathered at a time.

    Args:
        module: Candidate module (passed by FSDP).
        recurse: True while FSDP asks whether to descend into ``module``.
        nonwrapped_numel: Parameters not yet wrapped (unused).
        class_names: Class names to wrap. Defaults to mmpretrain's
            ``TransformerEncoderLayer`` (the Sapiens encoder layer).

    Returns:
        Whether to descend (always) or to wrap ``module``.
    """
    if recurse:
        return True
    return type(module).__name__ in set(class_names)
