"""Linear layers with their weights packed once for CPU inference.

``F.linear`` on a CPU hands the GEMM library (oneDNN for bf16, MKL for
float32) a plain weight matrix, which it reorders into its blocked layout on
every call; under ``torch.autocast`` PyTorch also casts every float32 weight
to bf16 on every call. :class:`PackedCpuLinear` keeps the weight in
oneDNN's blocked layout (cast once for autocast) and calls oneDNN's matmul
on it: measured on the Sapiens shapes (AMD EPYC with AVX512_BF16, 2
threads) about 5 % faster in bf16 and 20-25 % faster in float32 (oneDNN's
float32 GEMM on a packed weight against MKL's on a plain one), and no
per-call weight cast under autocast.

The packed copy is made on the first CPU inference call and dropped when
the weight changes (``load_state_dict``, an optimiser step), when the
module moves or is cast, or by :func:`unpack_cpu_linears`; it costs the
size of the layer's weight in the compute dtype. Training (autograd),
other devices and dtypes, ``torch.compile`` / export / TorchScript / ONNX
tracing run the plain ``nn.Linear`` forward: the state dict, the module
tree's parameters and every other path are unchanged.
"""
from typing import Optional, Tuple

import torch
import torch.nn as nn
from mmcv.cnn.bricks.wrappers import Linear as MMCVLinear

from .cpu_kernels import plain_cpu_inference

__all__ = ['PackedCpuLinear', 'PackedMMCVLinear', 'pack_cpu_linears',
           'unpack_cpu_linears', 'cpu_packed_linear_available']


def cpu_packed_linear_available() -> bool:
    """Whether this PyTorch build has oneDNN's packed linear ops."""
    return (torch.backends.mkldnn.is_available()
            and hasattr(torch.ops.mkldnn, '_reorder_linear_weight')
            and hasattr(torch.ops.mkldnn, '_linear_pointwise'))


class PackedCpuLinear(nn.Linear):
    """``nn.Linear`` whose CPU inference runs on a packed weight.

    The route applies to float32 or bf16 CPU tensors with no autograd and
    no tracing: input and weight of one dtype, or CPU autocast to bf16 (a
    float32 model under ``torch.autocast``, where ``nn.Linear`` would cast
    weight and bias to bf16 on every call). It gives ``F.linear``'s result
    up to the order of the float32 accumulation (oneDNN's blocking instead
    of MKL's or of oneDNN's unpacked kernel): measured, one bf16 step in
    under 1 % of the bf16 outputs, float32 outputs within 1e-6 relative.

    Modules become this class through :func:`pack_cpu_linears`; the
    parameters and state-dict keys stay those of ``nn.Linear``.
    """

    _packed: Optional[Tuple[tuple, torch.Tensor, Optional[torch.Tensor]]]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = self._packed_dtype(x)
        if dtype is None:
            return super().forward(x)
        weight, bias = self._packed_weight(dtype)
        # autocast would cast a float32 input to bf16 the same way
        return torch.ops.mkldnn._linear_pointwise(x.to(dtype), weight, bias,
                                                  'none', [], '')

    def _packed_dtype(self, x: torch.Tensor) -> Optional[torch.dtype]:
        """The dtype the packed route computes this call in, or None for
        ``nn.Linear``'s own forward."""
        w = self.weight
        dtypes = (torch.float32, torch.bfloat16)
        if (x.dim() < 2 or x.numel() == 0 or x.dtype not in dtypes
                or w.dtype not in dtypes):
            return None
        if torch.is_autocast_enabled('cpu'):
            # autocast computes linear layers in its dtype: bf16 packs
            if torch.get_autocast_dtype('cpu') != torch.bfloat16:
                return None
            dtype = torch.bfloat16
        elif x.dtype == w.dtype:
            dtype = w.dtype
        else:
            return None  # nn.Linear raises its dtype-mismatch error
        return dtype if plain_cpu_inference(x, w) else None

    def _packed_weight(
            self,
            dtype: torch.dtype) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        w, b = self.weight, self.bias
        key = (dtype, _identity(w), None if b is None else _identity(b))
        packed = getattr(self, '_packed', None)
        if packed is None or packed[0] != key:
            self._packed = None  # the old copy goes before the new one
            with torch.no_grad():
                weight = torch.ops.mkldnn._reorder_linear_weight(
                    w.detach().to(dtype))
                bias = None if b is None else b.detach().to(dtype)
            packed = self._packed = (key, weight, bias)
        return packed[1], packed[2]

    def __getstate__(self):
        # The packed copy is an opaque oneDNN tensor: copies and pickles
        # (deepcopy, torch.save of the module) repack on demand instead.
        state = self.__dict__.copy()
        state['_packed'] = None
        return state

    def _apply(self, fn, recurse=True):
        self._packed = None  # .to(), .float(), .cuda()... repack on demand
        return super()._apply(fn, recurse)


def _identity(t: torch.Tensor) -> tuple:
    """What the packed copy of ``t`` depends on: its memory, dtype and, for
    tensors made outside ``torch.inference_mode``, its in-place version
    (inference tensors keep no version: parameters created in inference
    mode and then changed in place in it are not noticed)."""
    version = None if t.is_inference() else t._version
    return (t.data_ptr(), t.dtype, version)


class PackedMMCVLinear(PackedCpuLinear, MMCVLinear):
    """mmcv's ``Linear`` (the one mmcv's and mmpretrain's FFNs build) with
    the packed route of :class:`PackedCpuLinear`; other calls run mmcv's
    forward."""


# plain class -> its packed class
_PACKED_CLASSES = {nn.Linear: PackedCpuLinear, MMCVLinear: PackedMMCVLinear}


def pack_cpu_linears(model: nn.Module) -> int:
    """Let every plain linear layer of ``model`` (``nn.Linear`` and mmcv's
    ``Linear``) run CPU inference on a packed weight
    (:class:`PackedCpuLinear`), in place.

    Nothing is packed here: each layer packs its weight at its first CPU
    inference call. Other subclasses of ``nn.Linear`` (quantised, LoRA...)
    are left alone. A no-op where PyTorch lacks oneDNN's packed ops.

    Returns:
        The number of layers converted.
    """
    if not cpu_packed_linear_available():
        return 0
    count = 0
    for module in model.modules():
        packed = _PACKED_CLASSES.get(type(module))
        if packed is not None:
            module.__class__ = packed
            module._packed = None
            count += 1
    return count


def unpack_cpu_linears(model: nn.Module) -> int:
    """Undo :func:`pack_cpu_linears`: plain linear layers again, the packed
    copies freed. Returns the number of layers converted."""
    plain = {v: k for k, v in _PACKED_CLASSES.items()}
    count = 0
    for module in model.modules():
        if type(module) in plain:
            del module._packed
            module.__class__ = plain[type(module)]
            count += 1
    return count
