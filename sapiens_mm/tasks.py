"""The task, registry-scope and precision vocabulary of sapiens_mm.

This module is the one place that says which tasks exist, which OpenMMLab
registry builds each task's model, and which precision names are accepted.
Every other module imports these names; none restates them. It depends on
nothing of the package but the check that the package is itself
(:mod:`sapiens_mm.utils.package_origin`: imported first by most entry points,
it says so when a namespace package shadows sapiens_mm), so any layer may
import it; torch is imported when
a precision table (:data:`DTYPES`, :data:`ROPE_DTYPES`) is first read, so a
command line that only needs the task names (``python -m sapiens_mm
--help``) starts without it.
"""
from typing import (TYPE_CHECKING, Any, Dict, Iterator, Literal, Mapping,
                    Optional, Tuple)

from sapiens_mm.utils.package_origin import check_package_origin

check_package_origin()

if TYPE_CHECKING:
    import torch

__all__ = [
    'Task', 'TASKS', 'CLI_TASKS', 'DENSE_TASKS', 'MAP_TASKS', 'TASK_VERSIONS',
    'TASK_SCOPES', 'DTYPES',
    'RopeDtype', 'ROPE_DTYPES', 'resolve_dtype', 'task_of_config'
]

Task = Literal['pose', 'seg', 'depth', 'normal', 'pointmap', 'albedo',
               'matting']

#: The tasks in the order the composite inferencer runs them: matting and
#: segmentation first (their person mask is applied to depth, normals,
#: pointmaps and albedo), pose last. ``pointmap``, ``albedo`` and
#: ``matting`` are Sapiens2's.
TASKS: Tuple[str, ...] = ('matting', 'seg', 'depth', 'normal', 'pointmap',
                          'albedo', 'pose')

#: The tasks in the order command lines list them (pose first).
CLI_TASKS: Tuple[str, ...] = ('pose', ) + tuple(t for t in TASKS
                                                if t != 'pose')

#: The dense (per-pixel) tasks, in :data:`TASKS` order.
DENSE_TASKS: Tuple[str, ...] = tuple(t for t in TASKS if t != 'pose')

#: The dense tasks that regress a map of the person (everything dense but
#: seg and matting, which give the person mask): that mask applies to them,
#: and they flip-average by value.
MAP_TASKS: Tuple[str, ...] = tuple(t for t in DENSE_TASKS
                                   if t not in ('seg', 'matting'))

#: The model generations that provide each task: 1 (Sapiens), 2 (Sapiens2).
TASK_VERSIONS: Dict[str, Tuple[int, ...]] = {
    'seg': (1, 2),
    'depth': (1, ),
    'normal': (1, 2),
    'pointmap': (2, ),
    'albedo': (2, ),
    'matting': (2, ),
    'pose': (1, 2),
}

#: The OpenMMLab registry scope that builds each task's model.
TASK_SCOPES: Dict[str, str] = {
    t: ('mmpose' if t == 'pose' else 'mmseg')
    for t in TASKS
}


class _DtypeTable(Mapping):
    """A read-only ``{name: torch.dtype}`` table that imports torch on first
    use (so importing this module does not)."""

    def __init__(self, names: Dict[str, str]) -> None:
        self._names = names
        self._dtypes: Optional[Dict[str, 'torch.dtype']] = None

    def _table(self) -> Dict[str, 'torch.dtype']:
        if self._dtypes is None:
            import torch
            self._dtypes = {k: getattr(torch, v)
                            for k, v in self._names.items()}
        return self._dtypes

    def __getitem__(self, name: str) -> 'torch.dtype':
        return self._table()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return repr(self._table())


#: Names accepted for an inference or training precision.
DTYPES: Mapping[str, 'torch.dtype'] = _DtypeTable({
    'fp32': 'float32',
    'float32': 'float32',
    'bf16': 'bfloat16',
    'bfloat16': 'bfloat16',
    'fp16': 'float16',
    'float16': 'float16',
})

RopeDtype = Literal['bf16', 'fp32']
#: Precisions of Sapiens2's RoPE tables (official: bf16, even in fp32 models).
ROPE_DTYPES: Mapping[str, 'torch.dtype'] = _DtypeTable({
    'bf16': 'bfloat16',
    'fp32': 'float32'
})


def resolve_dtype(dtype: Any, argument: str = 'dtype') -> 'torch.dtype':
    """``dtype`` (a name of :data:`DTYPES` or a ``torch.dtype``) as a
    ``torch.dtype``.

    Raises:
        ValueError: An unknown name or dtype; the message names
            ``argument`` and the accepted names.
    """
    import torch
    if isinstance(dtype, torch.dtype) and dtype in DTYPES.values():
        return dtype
    if isinstance(dtype, str) and dtype in DTYPES:
        return DTYPES[dtype]
    raise ValueError(f'{argument} must be one of {", ".join(DTYPES)} (or the '
                     f'matching torch.dtype), got {dtype!r}.')


def task_of_config(cfg: Mapping) -> str:
    """The task of a model config (an mmengine ``Config`` or a dict with a
    ``model`` entry).

    ``TopdownPoseEstimator`` (and ``Sapiens2TopdownPoseEstimator``) is pose,
    ``EncoderDecoder`` is seg, ``SapiensDenseEstimator`` (depth / normal)
    and ``Sapiens2DenseEstimator`` (normal / pointmap / albedo / matting)
    are their ``task``.

    Raises:
        ValueError: Another model type, or a task outside :data:`TASKS`.
    """
    model: Optional[Mapping] = cfg.get('model') if hasattr(cfg,
                                                          'get') else None
    model = model or {}
    model_type = str(model.get('type', '')).split('.')[-1]
    if model_type in ('TopdownPoseEstimator', 'Sapiens2TopdownPoseEstimator'):
        task = 'pose'
    elif model_type == 'EncoderDecoder':
        task = 'seg'
    elif model_type == 'SapiensDenseEstimator':
        task = model.get('task', 'depth')
    elif model_type == 'Sapiens2DenseEstimator':
        task = model.get('task', 'normal')
    else:
        raise ValueError(
            f'Config model type {model_type!r} is not a Sapiens task model; '
            'expected TopdownPoseEstimator (pose), EncoderDecoder (seg), '
            'SapiensDenseEstimator (depth / normal) or Sapiens2DenseEstimator '
            '(normal / pointmap / albedo / matting).')
    if task not in TASKS:
        raise ValueError(f'Config model task {task!r} is not one of '
                         f'{", ".join(TASKS)}.')
    return task
