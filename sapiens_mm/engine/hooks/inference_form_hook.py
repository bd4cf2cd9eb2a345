"""Run mmengine's validation and test loops on the inference form of the
model's CPU linear layers."""
from typing import Optional, Union

import torch
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.registry import HOOKS

from sapiens_mm.tasks import resolve_dtype
from sapiens_mm.utils.cpu_linear import pack_cpu_linears, unpack_cpu_linears

__all__ = ['InferenceFormHook']


@HOOKS.register_module()
class InferenceFormHook(Hook):
    """Pack the model's CPU linear layers for the iterations of a
    validation or test loop, and convert them back when the loop's epoch
    ends: a Runner-built model evaluates at the speed of the inferencers
    (see :func:`sapiens_mm.apis.optimize_for_inference`).

    The layers are packed at the loop's first iteration (after every
    ``before_val_epoch`` / ``before_test_epoch`` hook, e.g. ``EMAHook``
    swapping its averaged weights in, and after the loop put the model in
    eval mode) and converted back in ``after_val_epoch`` /
    ``after_test_epoch`` before hooks of lower priority run (``EMAHook``
    swapping the training weights back), so no hook that writes weights
    meets a packed layer. Packing in the weights' own dtype (the default)
    is lossless: training resumes from exactly the weights it had.

    ``tools/test.py`` adds it. Models on a GPU are left as they are.

    Args:
        dtype: Compute dtype of the packed layers; None (default): each
            weight's own dtype.
        val: Pack for validation loops. Defaults to True.
        test: Pack for test loops. Defaults to True.
    """

    priority = 'ABOVE_NORMAL'  # before EMAHook (NORMAL) at an epoch's end

    def __init__(self,
                 dtype: Union[None, str, torch.dtype] = None,
                 val: bool = True,
                 test: bool = True) -> None:
        self.dtype = None if dtype is None else resolve_dtype(dtype)
        self.val = val
        self.test = test
        self._packed = False

    def _pack(self, runner) -> None:
        if self._packed:
            return
        self._packed = True
        count = pack_cpu_linears(runner.model, self.dtype)
        if count:
            print_log(f'{count} linear layers packed for CPU inference',
                      logger='current')

    def _unpack(self, runner) -> None:
        if self._packed:
            unpack_cpu_linears(runner.model)
            self._packed = False

    def before_val_iter(self, runner, batch_idx: int,
                        data_batch: Optional[dict] = None) -> None:
        if self.val:
            self._pack(runner)

    def after_val_epoch(self, runner, metrics=None) -> None:
        self._unpack(runner)

    def before_test_iter(self, runner, batch_idx: int,
                         data_batch: Optional[dict] = None) -> None:
        if self.test:
            self._pack(runner)

    def after_test_epoch(self, runner, metrics=None) -> None:
        self._unpack(runner)
