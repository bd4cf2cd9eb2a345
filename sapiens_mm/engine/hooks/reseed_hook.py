"""Make the random numbers of a training step a function of its position."""
import random
from typing import Optional

import numpy as np
import torch
from mmengine.dist import get_dist_info
from mmengine.hooks import Hook
from mmengine.registry import HOOKS

__all__ = ['ReseedHook']

_EPOCH, _ITER = 1, 2


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
