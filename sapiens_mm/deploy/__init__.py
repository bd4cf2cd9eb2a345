"""Deployment: export task models to ONNX / ``torch.export`` and run the
exported files (see the README, "Deployment")."""
from .export import (
                     DEFAULT_OPSET,
                     MIN_OPSET,
                     OUTPUT_NAMES,
                     SapiensExportModule,
                     build_task_model,
                     export_metadata,
                     export_model,
                     read_metadata,
                     set_input_size,
)
from .runtime import (
                     EXPORTED_SUFFIXES,
                     ExportedModel,
                     is_exported_model,
                     postprocess_dense,
                     postprocess_pose,
)
from .safe_load import (UnsafeModelError, check_pt2_archive,
                        config_from_data, config_to_data)

__all__ = [
    'DEFAULT_OPSET', 'MIN_OPSET', 'OUTPUT_NAMES', 'SapiensExportModule',
    'build_task_model', 'export_metadata', 'export_model', 'read_metadata',
    'set_input_size', 'EXPORTED_SUFFIXES', 'ExportedModel',
    'is_exported_model', 'postprocess_dense', 'postprocess_pose',
    'UnsafeModelError', 'check_pt2_archive', 'config_from_data',
    'config_to_data'
]
