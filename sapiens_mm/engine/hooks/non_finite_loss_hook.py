"""Stop or skip a training step whose loss is NaN / inf, and warn about (and
eventually stop) steps whose loss has no valid element."""
import math
from typing import Dict, List, Literal, Tuple

import torch
import torch.nn as nn
from mmengine.dist import all_reduce, get_dist_info
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.model import is_model_wrapper
from mmengine.optim import OptimWrapper
from mmengine.registry import HOOKS

__all__ = ['NonFiniteLossHook']


def _unwrap(model: nn.Module) -> nn.Module:
    """The module that owns ``parse_losses`` (under DDP / FSDP / DeepSpeed
    wrappers)."""
    seen = 0
    while is_model_wrapper(model) or not hasattr(model, 'parse_losses'):
        inner = getattr(model, 'module', None) or getattr(model, 'model', None)
        if inner is None or seen > 4:
            raise TypeError(f'NonFiniteLossHook: cannot find the model with '
                            f'`parse_losses` inside {type(model).__name__}.')
        model, seen = inner, seen + 1
    return model


@HOOKS.register_module()
class NonFiniteLossHook(Hook):
    """Check every training loss before the backward pass and stop the run,
    or skip the step, when it is NaN or infinite.

    Without it a single non-finite loss reaches ``backward`` and the
    optimizer, and every weight becomes NaN without an error. The check runs
    between the forward pass and ``optim_wrapper.update_params``, on the
    total loss and on every logged term whose name contains ``'loss'``
    (the terms that are summed into it). In distributed training the
    verdict is all-reduced, so all ranks stop or skip together (a rank that
    skipped the backward pass alone would hang the gradient all-reduce).

    - ``action='stop'`` (default): raise ``FloatingPointError`` naming the
      iteration, epoch, rank and every loss term with its value. The weights
      and optimizer state are those of the previous step, so the last
      checkpoint is intact.
    - ``action='skip'``: drop the batch: no backward pass, no optimizer step
      (weights, optimizer moments and step count untouched; with gradient
      accumulation, the gradients accumulated so far in the window are
      discarded too), log a warning, leave the non-finite values out of the
      logged losses, and go on. After ``max_consecutive_skips`` skipped
      iterations in a row the run stops as with ``'stop'``: the model has
      diverged and skipping only hides it.

    A finite total loss of exactly 0 means that no target element counted:
    every target of the batch is NaN, ignored (e.g. all ``ignore_index``) or
    has zero weight, and the masked losses return 0 with zero gradients. The
    model learns nothing from such a batch, so each one is logged as a
    warning; ``max_consecutive_empty`` of them in a row stop the run
    (``'stop'``) or, with ``'skip'``, they are skipped like non-finite
    steps (so weight decay and momentum do not move the weights).

    ``tools/train.py`` adds this hook with ``action='stop'`` unless the
    config has one; ``--nonfinite-loss skip`` switches the action. In a
    config::

        custom_hooks = [dict(type='NonFiniteLossHook', action='skip')]

    Args:
        action: ``'stop'`` or ``'skip'``. Defaults to ``'stop'``.
        max_consecutive_skips: With ``'skip'``, stop after this many skipped
            iterations in a row. Defaults to 10.
        max_consecutive_empty: With ``'stop'``, stop after this many
            iterations in a row whose loss has no valid element. Defaults
            to 10.
    """

    priority = 'VERY_HIGH'

    def __init__(self,
                 action: Literal['stop', 'skip'] = 'stop',
                 max_consecutive_skips: int = 10,
                 max_consecutive_empty: int = 10) -> None:
        if action not in ('stop', 'skip'):
            raise ValueError(f"NonFiniteLossHook action must be 'stop' or "
                             f"'skip', got {action!r}.")
        if int(max_consecutive_skips) < 1:
            raise ValueError('max_consecutive_skips must be >= 1, got '
                             f'{max_consecutive_skips}.')
        if int(max_consecutive_empty) < 1:
            raise ValueError('max_consecutive_empty must be >= 1, got '
                             f'{max_consecutive_empty}.')
        self.action = action
        self.max_consecutive_skips = int(max_consecutive_skips)
        self.max_consecutive_empty = int(max_consecutive_empty)
        self.num_empty = 0
        self._consecutive_empty = 0
        self.num_skipped = 0
        self._consecutive = 0
        self._skip_pending = False
        self._patched: List[Tuple[object, str]] = []

    # -- wiring ------------------------------------------------------------
    def before_train(self, runner) -> None:
        model = _unwrap(runner.model)
        optim_wrapper = runner.optim_wrapper
        if self.action == 'skip' and not isinstance(optim_wrapper,
                                                    OptimWrapper):
            raise TypeError(
                "NonFiniteLossHook(action='skip') needs a single "
                f'OptimWrapper, got {type(optim_wrapper).__name__}; use '
                "action='stop' with several optimizers.")
        parse_losses = model.parse_losses

        def checked_parse_losses(losses):
            loss, log_vars = parse_losses(losses)
            return self._check(runner, loss, log_vars)

        model.parse_losses = checked_parse_losses
        self._patched.append((model, 'parse_losses'))
        if self.action == 'skip':
            update_params = optim_wrapper.update_params

            def guarded_update_params(loss, step_kwargs=None,
                                      zero_kwargs=None):
                if self._skip_pending:
                    self._skip_pending = False
                    optim_wrapper.zero_grad(**(zero_kwargs or {}))
                    # Keep gradient-accumulation windows aligned with
                    # iterations, as backward() would have.
                    optim_wrapper._inner_count += 1
                    return None
                return update_params(loss, step_kwargs, zero_kwargs)

            optim_wrapper.update_params = guarded_update_params
            self._patched.append((optim_wrapper, 'update_params'))

    def after_train(self, runner) -> None:
        for obj, name in self._patched:
            if name in vars(obj):
                delattr(obj, name)
        self._patched.clear()

    # -- the check ---------------------------------------------------------
    @staticmethod
    def _is_finite(value) -> bool:
        if isinstance(value, torch.Tensor):
            return bool(torch.isfinite(value.detach()).all())
        try:
            return math.isfinite(float(value))
        except (TypeError, ValueError):
            return True

    def _check(self, runner, loss: torch.Tensor,
               log_vars: Dict) -> Tuple[torch.Tensor, Dict]:
        bad_terms = [
            k for k, v in log_vars.items()
            if 'loss' in k and not self._is_finite(v)
        ]
        local_bad = bool(bad_terms) or not self._is_finite(loss)
        local_empty = not local_bad and float(loss.detach()) == 0.0
        rank, world_size = get_dist_info()
        # [1 + highest rank that saw a non-finite loss (0: none did),
        #  1 if some rank's loss had a valid element (0: all empty)]
        verdict = torch.tensor([rank + 1 if local_bad else 0,
                                0 if local_empty else 1],
                               dtype=torch.int64, device=loss.device)
        if world_size > 1:
            all_reduce(verdict, op='max')
        worst_rank = int(verdict[0].item()) - 1
        if worst_rank < 0 and int(verdict[1].item()) == 0:
            return self._empty_loss(runner, loss, log_vars)
        self._consecutive_empty = 0
        if worst_rank < 0:
            self._consecutive = 0
            return loss, log_vars

        message = self._describe(runner, loss, log_vars, local_bad,
                                 worst_rank, rank)
        if self.action == 'stop':
            raise FloatingPointError(
                message + ' The run stops before the backward pass, so the '
                'weights and the last checkpoint are intact. Lower the '
                'learning rate, enable gradient clipping '
                '(optim_wrapper.clip_grad), check this batch of data, or '
                "skip such steps with NonFiniteLossHook(action='skip') "
                '(tools/train.py --nonfinite-loss skip).')
        self._consecutive += 1
        self.num_skipped += 1
        if self._consecutive > self.max_consecutive_skips:
            raise FloatingPointError(
                message + f' This is the {self._consecutive}th non-finite '
                'loss in a row (max_consecutive_skips='
                f'{self.max_consecutive_skips}): the training has diverged. '
                'Resume from an earlier checkpoint with a lower learning '
                'rate or gradient clipping.')
        self._skip_pending = True
        print_log(
            message + ' Skipped this step (no backward pass, no optimizer '
            f'update); {self.num_skipped} step(s) skipped so far.',
            logger='current', level=30)
        finite_vars = type(log_vars)(
            (k, v) for k, v in log_vars.items() if self._is_finite(v))
        return loss, finite_vars

    def _empty_loss(self, runner, loss: torch.Tensor,
                    log_vars: Dict) -> Tuple[torch.Tensor, Dict]:
        """Every rank's loss is exactly 0: no valid target element."""
        self._consecutive_empty += 1
        self.num_empty += 1
        message = (
            f'Training loss is exactly 0 at iteration {runner.iter + 1} '
            f'(epoch {runner.epoch + 1}): no target element of the batch '
            'counted (all targets NaN, ignored or with zero weight), so '
            'nothing is learned from it. Check the annotations and the '
            f'pipeline ({self._consecutive_empty} such iteration(s) in a '
            'row).')
        if self.action == 'stop':
            if self._consecutive_empty >= self.max_consecutive_empty:
                raise FloatingPointError(
                    message + f' Stopping: max_consecutive_empty='
                    f'{self.max_consecutive_empty} reached; the training '
                    'data has no usable targets.')
            print_log(message, logger='current', level=30)
            return loss, log_vars
        self._consecutive += 1
        self.num_skipped += 1
        if self._consecutive > self.max_consecutive_skips:
            raise FloatingPointError(
                message + f' Stopping: {self._consecutive} skipped '
                f'iterations in a row (max_consecutive_skips='
                f'{self.max_consecutive_skips}).')
        self._skip_pending = True
        print_log(message + ' Skipped this step (no optimizer update).',
                  logger='current', level=30)
        return loss, log_vars

    @staticmethod
    def _describe(runner, loss, log_vars, local_bad: bool, worst_rank: int,
                  rank: int) -> str:
        terms = ', '.join(
            f'{k}={float(v):.6g}' for k, v in log_vars.items()
            if 'loss' in k and v is not None and getattr(v, 'numel',
                                                         lambda: 1)() == 1)
        where = f'iteration {runner.iter + 1} (epoch {runner.epoch + 1})'
        if get_dist_info()[1] > 1:
            where += f' on rank {worst_rank if not local_bad else rank}'
        if local_bad:
            return (f'Non-finite training loss at {where}: '
                    f'{terms or "loss=" + str(loss)}.')
        return (f'Non-finite training loss at {where} (this rank {rank}: '
                f'{terms}).')
