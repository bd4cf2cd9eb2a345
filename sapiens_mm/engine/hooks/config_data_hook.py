"""Store the run's config as data in every checkpoint it saves."""
from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.registry import HOOKS

from sapiens_mm.checkpoint.config_data import config_to_data

__all__ = ['ConfigDataHook', 'CONFIG_DATA_KEY']

#: Key under the checkpoint's ``meta`` that holds the config as data.
CONFIG_DATA_KEY = 'config_data'


@HOOKS.register_module()
class ConfigDataHook(Hook):
    """Write the resolved config into each checkpoint as plain data.

    mmengine saves ``meta['cfg']``, the config as Python text: reading it
    back means executing it, which sapiens_mm never does with a file a user
    hands it. This hook adds ``meta['config_data']``: the same config as a
    JSON-safe dict (:func:`sapiens_mm.deploy.config_to_data`: dicts,
    lists, strings, numbers, booleans, None, tuples tagged), which
    :func:`sapiens_mm.deploy.config_from_data` rebuilds without
    executing anything. The inference front end then builds the model the
    checkpoint was trained with from the file alone, even when the run
    changed the shipped config (head widths, input size, number of
    keypoints).

    A config holding values that are not plain data (e.g. class objects of
    a lazy-import config) is saved without ``config_data``, said once in
    the log.

    ``tools/train.py`` and ``make demo`` add this hook to every run.
    """

    priority = 'VERY_LOW'

    def __init__(self) -> None:
        self._data = None
        self._said = False

    def before_save_checkpoint(self, runner, checkpoint: dict) -> None:
        cfg = getattr(runner, 'cfg', None)
        if not cfg:  # a Runner built from keyword arguments has no config
            return
        if self._data is None:
            try:
                self._data = config_to_data(cfg)
            except ValueError as e:
                if not self._said:
                    self._said = True
                    print_log(
                        f'Checkpoints of this run do not carry their config '
                        f'as data ({e}); pass the config file with them '
                        'when running inference.', logger='current',
                        level=30)
                return
        checkpoint.setdefault('meta', {})[CONFIG_DATA_KEY] = self._data
