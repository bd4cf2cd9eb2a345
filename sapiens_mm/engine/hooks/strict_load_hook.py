"""Check that an evaluated checkpoint fits the model before it is loaded."""
from typing import Optional

from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.model import is_model_wrapper
from mmengine.registry import HOOKS

from sapiens_mm.checkpoint import (check_finite, get_state_dict,
                                   state_dict_problems)

__all__ = ['StrictLoadHook']


@HOOKS.register_module()
class StrictLoadHook(Hook):
    """Refuse a checkpoint that does not fit the model, before the Runner
    loads it.

    mmengine's Runner loads ``load_from`` with ``strict=False``: a
    checkpoint of another task, arch or size, or with missing keys, loads
    partly and the rest of the model keeps its random initialisation, so an
    evaluation reports metrics of random weights without an error. This
    hook runs in ``after_load_checkpoint`` (called with the checkpoint just
    before its weights are copied into the model) and

    - refuses NaN / inf weights, naming the tensors (always);
    - with ``strict=True`` (default) raises ``RuntimeError`` listing the
      missing, unexpected and wrong-shape keys; with ``strict=False`` logs
      them as a warning and lets the Runner load what fits.

    ``tools/test.py`` adds it (``--non-strict`` sets ``strict=False``).

    Args:
        strict: Refuse any mismatch. Defaults to True.
        source: Name of the checkpoint for messages. Defaults to
            ``'checkpoint'``.
    """

    priority = 'VERY_HIGH'

    def __init__(self, strict: bool = True,
                 source: Optional[str] = None) -> None:
        self.strict = bool(strict)
        self.source = source or 'checkpoint'

    def after_load_checkpoint(self, runner, checkpoint: dict) -> None:
        model = runner.model.module if is_model_wrapper(
            runner.model) else runner.model
        state = get_state_dict(checkpoint)
        check_finite(state, self.source)
        msg, _ = state_dict_problems(model, state, self.source)
        if not msg:
            return
        if self.strict:
            raise RuntimeError(
                msg + ' Evaluating it would report metrics of partly random '
                'weights. Use the checkpoint of this config (same task, arch '
                'and size), or pass --non-strict to evaluate anyway.')
        print_log(msg + ' --non-strict: evaluating anyway; the weights that '
                  'do not fit keep their random initialisation, so the '
                  'metrics do not measure this checkpoint.',
                  logger='current', level=30)
