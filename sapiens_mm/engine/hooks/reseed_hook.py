"""Make the random numbers of a training step a function of its position."""
import random
from typing import Optional

import numpy as np
import torch
from mmengine.dist import get_dist_info
from mmengine.hooks import Hook
from mmengine.registry import HOOKS

__all__ = ['ReseedHook']

_EPOCH, _ITER, _DATA = 1, 2, 3


class _ReseedingIterator:
    """Wraps an iteration-based loop's data iterator: reseeds before
    fetching batch ``i`` (counted from the start of training, including the
    batches a resumed loop fetches to skip what was trained)."""

    def __init__(self, inner, hook: 'ReseedHook') -> None:
        self.inner, self.hook, self.count = inner, hook, 0

    def __iter__(self):
        return self

    def __next__(self):
        self.hook.reseed(_DATA, self.count)
        self.count += 1
        return next(self.inner)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@HOOKS.register_module()
class ReseedHook(Hook):
    """Reseed Python, NumPy and torch (CPU and CUDA) random generators at
    the start of every training epoch and iteration, from
    ``(seed, epoch or iteration, rank)``.

    mmengine seeds the generators once, at start-up. A run resumed from a
    checkpoint is seeded again from scratch, so its dropout masks, drop-path
    draws and data augmentation (with ``num_workers=0``) differ from those
    of the run it continues, and its losses drift away from an uninterrupted
    run. With this hook every epoch and every iteration starts from a state
    that depends only on the seed and its index, so ``--resume`` continues
    exactly (in ``--deterministic`` mode, losses equal to the last bit).

    Iteration-based loops (``IterBasedTrainLoop``) fetch the next batch
    *before* ``before_train_iter``, after the previous step's backward pass
    and any validation, and a resumed loop first fetches (and drops) the
    batches it already trained on. So the batch of iteration ``i`` is
    fetched right after a reseed from ``(seed, data, i)`` (the loop's data
    iterator is wrapped in ``before_train``): its augmentation (with
    ``num_workers=0``) no longer depends on what ran before it, and a run
    resumed mid-way draws the same crops and flips as one never stopped.

    Data-loader workers are seeded by mmengine's ``worker_init_fn`` (seed,
    rank and worker id) when they start; with ``persistent_workers=False``
    they restart every epoch, so their augmentation is reproducible on
    resume too. Persistent workers carry their generator state across
    epochs and are not covered.

    Ranks share a seed unless ``randomness.diff_rank_seed=True``, as in
    mmengine. ``tools/train.py`` adds this hook unless the config has one.

    Args:
        seed: Base seed. Defaults to the Runner's seed (``randomness.seed``,
            or the random seed mmengine drew and synchronised).
    """

    priority = 'VERY_HIGH'

    def __init__(self, seed: Optional[int] = None) -> None:
        self.seed = seed
        self._base = 0
        self._rank = 0

    def before_train(self, runner) -> None:
        self._base = int(self.seed if self.seed is not None else runner.seed)
        randomness = runner.cfg.get('randomness') or {}
        self._rank = get_dist_info()[0] if randomness.get(
            'diff_rank_seed', False) else 0
        loop = getattr(runner, 'train_loop', None)
        inner = getattr(loop, 'dataloader_iterator', None)
        if inner is not None and not isinstance(inner, _ReseedingIterator):
            loop.dataloader_iterator = _ReseedingIterator(inner, self)

    def before_train_epoch(self, runner) -> None:
        self.reseed(_EPOCH, runner.epoch)

    def before_train_iter(self, runner, batch_idx: int,
                          data_batch=None) -> None:
        self.reseed(_ITER, runner.iter)

    def reseed(self, kind: int, index: int) -> int:
        """Seed every generator from ``(seed, kind, index, rank)``.

        Returns:
            The 32-bit seed used.
        """
        seed = int(
            np.random.SeedSequence([self._base % 2**63, kind, index,
                                    self._rank]).generate_state(1)[0])
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)  # also every CUDA device
        return seed
