"""Check that an evaluated checkpoint fits the model before it is loaded."""
from typing import Optional

from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.model import is_model_wrapper
from mmengine.registry import HOOKS

from sapiens_mm.checkpoint import (check_finite, get_state_dict,
                                   load_state_dict)
from sapiens_mm.checkpoint.sapiens2_layout import from_official_layout

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
    before the Runner copies its weights into the model) and

    - refuses NaN / inf weights, naming the tensors (always);
    - with ``strict=True`` (default) loads the weights with
      :func:`sapiens_mm.checkpoint.load_state_dict` (official Sapiens2 key
      layouts renamed as by ``load_checkpoint``), which raises
      ``RuntimeError`` listing the missing, unexpected and wrong-shape
      keys; with ``strict=False`` logs a warning and lets the Runner load
      what fits (mmengine lists the rest).

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
        state = from_official_layout(get_state_dict(checkpoint), model)
        # what the Runner loads next: the checked (renamed) weights
        target = checkpoint['state_dict'] if isinstance(
            checkpoint.get('state_dict'), dict) else checkpoint
        target.clear()
        target.update(state)
        if not self.strict:
            check_finite(state, self.source)
            print_log(
                '--non-strict: the checkpoint is evaluated even if it does '
                'not fit the model; weights that do not fit keep their '
                'random initialisation (listed below), so the metrics may '
                'not measure this checkpoint.', logger='current', level=30)
            return
        try:
            load_state_dict(model, state, strict=True, source=self.source)
        except RuntimeError as e:
            raise RuntimeError(
                f'{e} Evaluating it would report metrics of partly random '
                'weights. Use the checkpoint of this config (same task, arch '
                'and size), or pass --non-strict to evaluate anyway.'
            ) from None
