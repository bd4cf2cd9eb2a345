"""The inference front end: the model builder (:mod:`.inference`) and the
inferencers (:mod:`.inferencers`), like ``mmpose.apis`` / ``mmseg.apis``.

Names that moved to their own packages (the model zoo to
:mod:`sapiens_mm.zoo`, the person detectors to :mod:`sapiens_mm.detection`,
the runner-config helpers to :mod:`sapiens_mm.engine.runner_cfg`) are still
importable from here for one release, with a ``DeprecationWarning``.
"""
import importlib
import warnings

from sapiens_mm.tasks import TASKS, task_of_config

from .inference import (
    dataset_meta_of_config,
    inference_pipeline,
    init_model,
    load_config,
    optimize_for_inference,
    set_input_size,
)
from .inferencers import DenseInferencer, PoseInferencer, SapiensInferencer

__all__ = [
    'TASKS', 'init_model', 'optimize_for_inference', 'load_config',
    'task_of_config',
    'dataset_meta_of_config', 'inference_pipeline', 'set_input_size',
    'SapiensInferencer', 'PoseInferencer', 'DenseInferencer'
]

#: Names that moved out of ``sapiens_mm.apis``, and their new modules.
_MOVED = {
    **{
        name: 'sapiens_mm.detection'
        for name in ('PersonDetector', 'OpenCVPersonDetector',
                     'MMDetPersonDetector')
    },
    **{
        name: 'sapiens_mm.zoo'
        for name in ('SapiensModelInfo', 'UnrecognizedCheckpointError',
                     'recognize_checkpoint', 'recognize_state_dict',
                     'shipped_config')
    },
    **{
        name: 'sapiens_mm.engine.runner_cfg'
        for name in ('amp_dtype', 'build_test_cfg', 'build_train_cfg',
                     'default_work_dir', 'enable_amp')
    },
}


def __getattr__(name: str):
    module = _MOVED.get(name)
    if module is None:
        raise AttributeError(
            f'module {__name__!r} has no attribute {name!r}')
    warnings.warn(
        f'sapiens_mm.apis.{name} moved to {module}.{name}; import it from '
        'there (the old name goes away in the next release).',
        DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(module), name)
