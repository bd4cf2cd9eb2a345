"""Mixed precision without loss scaling, for devices where mmengine's
``AmpOptimWrapper`` does not run (it asserts a GPU/NPU), e.g. bf16 on CPU."""
from contextlib import contextmanager
from typing import Literal

import torch
import torch.nn as nn
from mmengine.optim import OptimWrapper
from mmengine.registry import OPTIM_WRAPPERS


@OPTIM_WRAPPERS.register_module()
class AutocastOptimWrapper(OptimWrapper):
    """``OptimWrapper`` whose forward runs under ``torch.autocast``.

    bf16 keeps fp32's exponent range, so no loss scaling is needed. Used by
    ``tools/train.py --amp`` where fp16 is not supported.

    Args:
        dtype: Autocast dtype. Defaults to ``'bfloat16'``.
        **kwargs: Passed to ``OptimWrapper``.
    """

    def __init__(self,
                 dtype: Literal['bfloat16', 'float16'] = 'bfloat16',
                 **kwargs) -> None:
        super().__init__(**kwargs)
        if dtype not in ('bfloat16', 'float16'):
            raise ValueError(f'AutocastOptimWrapper dtype must be bfloat16 '
                             f'or float16, got {dtype!r}.')
        self.cast_dtype = getattr(torch, dtype)

    @contextmanager
    def optim_context(self, model: nn.Module):
        param = next(model.parameters(), None)
        device_type = param.device.type if param is not None else 'cpu'
        with super().optim_context(model), torch.autocast(
                device_type=device_type, dtype=self.cast_dtype):
            yield
