"""Deployment: export task models to ONNX / ``torch.export`` and run the
exported files (see docs/deployment.md).

Two layers live here. The metadata reader (:mod:`.metadata`), the runtime
(:mod:`.runtime`) and the archive checks (:mod:`.safe_load`) depend on
nothing above them, so the inferencers use them. The exporter
(:mod:`.export`) builds models with :func:`sapiens_mm.apis.init_model`, so
it sits above the inference front end: its names are loaded from here on
first use, and importing this package does not import the front end.
"""
import importlib

import sapiens_mm.utils  # noqa: F401  (first: says when sapiens_mm is shadowed)

from .metadata import OUTPUT_NAMES, read_metadata
from .runtime import (
    EXPORTED_SUFFIXES,
    ExportedModel,
    is_exported_model,
    postprocess_dense,
    postprocess_pose,
)
from .safe_load import (
    UnsafeModelError,
    check_graph_target,
    check_guard_expression,
    check_pt2_archive,
    check_size_expression,
    check_treespec,
    config_from_data,
    config_to_data,
)
from .trust import (
    TRUST_STORE_ENV,
    UntrustedModelError,
    open_trusted_pt2,
    trust_exported_program,
    trust_store_path,
    trusted_digests,
)

#: The exporter's names, loaded with :mod:`.export` on first use.
_EXPORT_NAMES = ('DEFAULT_OPSET', 'MIN_OPSET', 'SapiensExportModule',
                 'check_test_cfg', 'export_metadata', 'export_model')

__all__ = [
    'OUTPUT_NAMES', 'read_metadata', 'EXPORTED_SUFFIXES', 'ExportedModel',
    'is_exported_model', 'postprocess_dense', 'postprocess_pose',
    'UnsafeModelError', 'check_pt2_archive', 'check_graph_target',
    'check_guard_expression', 'check_size_expression', 'check_treespec',
    'config_from_data', 'config_to_data',
    'TRUST_STORE_ENV', 'UntrustedModelError', 'open_trusted_pt2',
    'trust_exported_program', 'trust_store_path', 'trusted_digests',
    *_EXPORT_NAMES
]


def __getattr__(name: str):
    if name in _EXPORT_NAMES:
        return getattr(importlib.import_module(f'{__name__}.export'), name)
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
