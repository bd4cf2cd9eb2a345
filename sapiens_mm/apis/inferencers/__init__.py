"""Inferencers: one per task and the multi-task one.

* :class:`PoseInferencer` and :class:`DenseInferencer` (seg, depth, normal,
  Sapiens2 pointmap / albedo) are ``mmengine.infer.BaseInferencer``
  subclasses (through :class:`BaseTaskInferencer`), called like mmpose's
  ``Pose2DInferencer`` and mmseg's ``MMSegInferencer`` on images:
  ``inferencer(inputs, return_datasamples=False, batch_size=1, **kwargs)``
  returns ``dict(predictions=[...], visualization=[...])``.
* :class:`SapiensInferencer` runs any of them together on images, folders,
  videos and webcams, decoding each input once; :func:`infer_sharded` runs
  it over millions of inputs across the processes of a torchrun / SLURM job,
  resumably.
"""
from .base_task_inferencer import BaseTaskInferencer
from .dense_inferencer import DENSE_TASKS, DenseInferencer
from .model_spec import ResolvedModel, resolve_model, resolve_models, task_of_checkpoint
from .pose_inferencer import PoseInferencer
from .sapiens_inferencer import RunInterrupted, SapiensInferencer
from .sharded import infer_sharded, write_coco_keypoint_results

__all__ = [
    'BaseTaskInferencer', 'DenseInferencer', 'PoseInferencer',
    'SapiensInferencer', 'RunInterrupted', 'DENSE_TASKS', 'ResolvedModel', 'resolve_model',
    'resolve_models', 'task_of_checkpoint', 'infer_sharded',
    'write_coco_keypoint_results'
]
