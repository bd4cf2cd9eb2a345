"""Inferencers: one per task (:class:`PoseInferencer`,
:class:`DenseInferencer`) and the multi-task :class:`SapiensInferencer`."""
from .base_task_inferencer import BaseTaskInferencer
from .dense_inferencer import DenseInferencer
from .model_spec import ResolvedModel, resolve_model, resolve_models
from .pose_inferencer import PoseInferencer
from .sapiens_inferencer import SapiensInferencer

__all__ = [
    'BaseTaskInferencer', 'DenseInferencer', 'PoseInferencer',
    'SapiensInferencer', 'ResolvedModel', 'resolve_model', 'resolve_models'
]
