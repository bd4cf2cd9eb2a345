"""Deployment: export task models to ONNX / ``torch.export`` and run the
exported files (see the README, "Deployment").

Models are built by :func:`sapiens_mm.apis.inference.init_model`; this
package depends on :mod:`sapiens_mm.apis.inference` only.
"""
from .export import (
                     DEFAULT_OPSET,
                     MIN_OPSET,
                     OUTPUT_NAMES,
                     SapiensExportModule,
                     check_test_cfg,
                     export_metadata,
                     export_model,
                     read_metadata,
)
from .runtime import (
                     EXPORTED_SUFFIXES,
                     ExportedModel,
                     is_exported_model,
                     postprocess_dense,
                     postprocess_pose,
)
from .safe_load import (UnsafeModelError, check_graph_target,
                        check_pt2_archive, check_size_expression,
                        config_from_data, config_to_data)
from .trust import (TRUST_STORE_ENV, UntrustedModelError, open_trusted_pt2,
                    trust_exported_program, trust_store_path,
                    trusted_digests)

__all__ = [
    'DEFAULT_OPSET', 'MIN_OPSET', 'OUTPUT_NAMES', 'SapiensExportModule',
    'check_test_cfg', 'export_metadata', 'export_model', 'read_metadata',
    'EXPORTED_SUFFIXES', 'ExportedModel', 'is_exported_model',
    'postprocess_dense', 'postprocess_pose', 'UnsafeModelError',
    'check_pt2_archive', 'check_graph_target', 'check_size_expression',
    'config_from_data',
    'config_to_data', 'TRUST_STORE_ENV', 'UntrustedModelError',
    'open_trusted_pt2', 'trust_exported_program', 'trust_store_path',
    'trusted_digests'
]
