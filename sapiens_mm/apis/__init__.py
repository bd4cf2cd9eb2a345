from .runner_cfg import (amp_dtype, build_test_cfg, build_train_cfg,
                         default_work_dir, enable_amp)

__all__ = [
    'amp_dtype', 'build_test_cfg', 'build_train_cfg', 'default_work_dir',
    'enable_amp'
]
from .inferencer import SapiensInferencer, task_of_config  # noqa: E402
from .model_zoo import (SapiensModelInfo,  # noqa: E402
                        UnrecognizedCheckpointError, recognize_checkpoint,
                        recognize_state_dict, shipped_config)
from .person_detector import (MMDetPersonDetector,  # noqa: E402
                              OpenCVPersonDetector, PersonDetector)

__all__ += [
    'SapiensInferencer', 'task_of_config', 'SapiensModelInfo',
    'UnrecognizedCheckpointError', 'recognize_checkpoint',
    'recognize_state_dict', 'shipped_config', 'PersonDetector',
    'OpenCVPersonDetector', 'MMDetPersonDetector'
]
