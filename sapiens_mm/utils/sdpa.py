"""Choosing the kernel behind ``F.scaled_dot_product_attention``.

mmpretrain's attention (and so every Sapiens backbone) calls PyTorch's
``F.scaled_dot_product_attention``, which picks a kernel per call: on a GPU
cuDNN's fused attention, FlashAttention-2 or the memory-efficient kernel,
on a CPU its own flash kernel or the plain math fallback.
:func:`sdpa_backend` pins that choice for the code inside it (through
``torch.nn.attention.sdpa_kernel``), so that a benchmark can time each
kernel on the same model.

Example:
    >>> with sdpa_backend('cudnn', 'cuda'):
    ...     feats = backbone(images)
"""
import contextlib
from typing import Iterator, Literal, Tuple, Union

import torch
from mmengine.logging import print_log

__all__ = ['SDPA_BACKENDS', 'SDPABackend', 'resolve_sdpa_backend',
           'sdpa_backend']

SDPABackend = Literal['auto', 'cudnn', 'flash', 'efficient', 'math']
#: Backend names accepted by :func:`sdpa_backend`.
SDPA_BACKENDS: Tuple[str, ...] = ('auto', 'cudnn', 'flash', 'efficient',
                                  'math')
# name -> member of torch.nn.attention.SDPBackend
_MEMBERS = dict(cudnn='CUDNN_ATTENTION', flash='FLASH_ATTENTION',
                efficient='EFFICIENT_ATTENTION', math='MATH')
# The kernels PyTorch implements for CPU tensors.
_CPU_BACKENDS = ('flash', 'math')


def resolve_sdpa_backend(name: str,
                         device: Union[str, torch.device]) -> str:
    """The backend :func:`sdpa_backend` uses for ``name`` on ``device``.

    ``'cudnn'`` and ``'efficient'`` exist for CUDA tensors only: on another
    device they resolve to ``'auto'`` (PyTorch's own choice), with a
    warning in the log.

    Args:
        name: One of :data:`SDPA_BACKENDS`.
        device: The device the attention runs on.

    Returns:
        str: The backend name that takes effect.

    Raises:
        ValueError: ``name`` is not one of :data:`SDPA_BACKENDS`.
    """
    if name not in SDPA_BACKENDS:
        raise ValueError(f'Unknown SDPA backend {name!r}; choose one of '
                         f'{list(SDPA_BACKENDS)}.')
    kind = torch.device(device).type
    if name != 'auto' and kind != 'cuda' and name not in _CPU_BACKENDS:
        print_log(
            f'SDPA backend {name!r} exists for CUDA tensors only; on {kind} '
            'PyTorch chooses the attention kernel itself.',
            logger='current', level=30)
        return 'auto'
    return name


@contextlib.contextmanager
def sdpa_backend(name: SDPABackend,
                 device: Union[str, torch.device]) -> Iterator[str]:
    """Run ``F.scaled_dot_product_attention`` with one kernel only.

    Inside the context every attention call uses the chosen kernel, or
    raises PyTorch's ``RuntimeError`` ("No available kernel") for inputs
    that kernel does not support (dtype, head size, device), so a timing is
    never silently of another kernel. ``'auto'`` leaves PyTorch's choice
    alone.

    Args:
        name: ``'auto'``, ``'cudnn'`` (cuDNN fused attention), ``'flash'``
            (FlashAttention-2 on CUDA, PyTorch's flash kernel on CPU),
            ``'efficient'`` (memory-efficient attention) or ``'math'``
            (the unfused reference).
        device: Where the attention runs; CUDA-only backends fall back to
            ``'auto'`` elsewhere (:func:`resolve_sdpa_backend`).

    Yields:
        str: The backend in effect.
    """
    effective = resolve_sdpa_backend(name, device)
    if effective == 'auto':
        yield effective
        return
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel([getattr(SDPBackend, _MEMBERS[effective])]):
        yield effective
