"""High-level APIs: the model builder, the inferencers, checkpoint
recognition, and the runner / benchmark / demo / curation helpers.

Nothing here imports :mod:`sapiens_mm.deploy` at import time (the exporter
depends on :mod:`sapiens_mm.apis.inference`; the inferencers load exported
models lazily), so either package can be imported first.
"""
from .inference import (TASKS, dataset_meta_of_config, inference_pipeline,
                        init_model, load_config, set_input_size,
                        task_of_config)
from .inferencers import DenseInferencer, PoseInferencer, SapiensInferencer
from .inferencers.utils import (MMDetPersonDetector, OpenCVPersonDetector,
                                PersonDetector)
from .model_zoo import (SapiensModelInfo, UnrecognizedCheckpointError,
                        recognize_checkpoint, recognize_state_dict,
                        shipped_config)
from .runner_cfg import (amp_dtype, build_test_cfg, build_train_cfg,
                         default_work_dir, enable_amp)

__all__ = [
    'TASKS', 'init_model', 'load_config', 'task_of_config',
    'dataset_meta_of_config', 'inference_pipeline', 'set_input_size',
    'SapiensInferencer', 'PoseInferencer', 'DenseInferencer',
    'PersonDetector', 'OpenCVPersonDetector', 'MMDetPersonDetector',
    'SapiensModelInfo', 'UnrecognizedCheckpointError', 'recognize_checkpoint',
    'recognize_state_dict', 'shipped_config', 'amp_dtype', 'build_test_cfg',
    'build_train_cfg', 'default_work_dir', 'enable_amp'
]
