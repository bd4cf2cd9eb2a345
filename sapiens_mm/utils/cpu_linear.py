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

:func:`fused_linear` adds what a transformer block does right after a
linear layer (GELU, SwiGLU's gate, a LayerScale, the residual add) to the
GEMM itself on the packed route, as oneDNN post-ops on the tile just
computed, instead of one more pass over the output in memory each: a
float32 Sapiens2 layer spends about 45 ms of its 830 ms in SwiGLU's
``silu`` and ``mul`` alone (AMD EPYC, 2 threads, 1024x768), about 10 ms
fused.
"""
from typing import Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmcv.cnn.bricks.wrappers import Linear as MMCVLinear

from .cpu_features import packed_linear_supported
from .cpu_kernels import plain_cpu_inference

__all__ = ['PackedCpuLinear', 'PackedMMCVLinear', 'pack_cpu_linears',
           'unpack_cpu_linears', 'cpu_packed_linear_available',
           'fused_linear', 'LINEAR_ACTIVATIONS']

#: The activations :func:`fused_linear` applies to a linear layer's output
#: ``y``: ``'gelu'`` (erf) and ``'gelu_tanh'`` as ``F.gelu``; ``'swiglu'``
#: ``F.silu(y1) * y2`` of the two halves of ``y`` along its last dim (the
#: output has half the layer's features).
LINEAR_ACTIVATIONS = ('gelu', 'gelu_tanh', 'swiglu')

# activation -> oneDNN eltwise post-op (attr, algorithm) of _linear_pointwise
_ONEDNN_ACTIVATIONS = {
    None: ('none', ''),
    'gelu': ('gelu', 'none'),
    'gelu_tanh': ('gelu', 'tanh'),
}


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

    _packed: Optional[Tuple[tuple, tuple]]

    def forward(self,
                x: torch.Tensor,
                activation: Optional[str] = None,
                scale: Optional[torch.Tensor] = None,
                residual: Optional[torch.Tensor] = None) -> torch.Tensor:
        """``residual + scale * activation(linear(x))``; with the defaults,
        ``nn.Linear``'s result.

        Args:
            x: (..., in_features).
            activation: None or one of :data:`LINEAR_ACTIVATIONS`.
            scale: A per-channel multiplier of the output (a LayerScale
                weight), with no ``activation``; None for none.
            residual: Added to the result (same shape); None for none.

        On the packed route the activation, a ``(out_features,)`` scale
        in float32 (folded into the packed weight and bias) and, where its
        dtype is the compute dtype, the residual are computed on the GEMM's
        output tile by oneDNN; elsewhere by the PyTorch ops of the formula.
        The results agree up to float32 rounding (oneDNN's GELU / SiLU and
        the folded scale; in bf16 the linear output is not rounded before
        the activation or the residual add, one rounding instead of two).
        """
        _check_epilogue(activation, scale)
        dtype = self._packed_dtype(
            x, *(t for t in (scale, residual) if t is not None))
        if dtype is None:
            return _epilogue(super().forward(x), activation, scale, residual)
        x = x.to(dtype)  # autocast would cast a float32 input the same way
        if activation == 'swiglu':
            w1, b1, w2, b2 = self._packed_weight(dtype, halves=True)
            gate = torch.ops.mkldnn._linear_pointwise(x, w1, b1, 'swish',
                                                      [], '')
            y = torch.ops.mkldnn._linear_pointwise.binary(
                x, gate, w2, b2, 'mul')
            return y if residual is None else residual + y
        # A scale is folded into float32 weights only: folded into bf16
        # ones it would add a rounding of every weight (measured: 14 %
        # more error than scaling the output).
        foldable = (scale is not None and dtype == torch.float32
                    and scale.shape == (self.out_features, ))
        weight, bias = self._packed_weight(
            dtype, scale=scale if foldable else None)
        if (residual is not None and activation is None
                and residual.dtype == dtype and residual.is_contiguous()
                and residual.shape == x.shape[:-1] + (self.out_features, )
                and (scale is None or foldable)):
            return torch.ops.mkldnn._linear_pointwise.binary(
                x, residual, weight, bias, 'add')
        attr, algorithm = _ONEDNN_ACTIVATIONS[activation]
        y = torch.ops.mkldnn._linear_pointwise(x, weight, bias, attr, [],
                                               algorithm)
        return _epilogue(y, None, None if foldable else scale, residual)

    def _packed_dtype(self, x: torch.Tensor,
                      *others: torch.Tensor) -> Optional[torch.dtype]:
        """The dtype the packed route computes this call in, or None for
        ``nn.Linear``'s own forward (``others``: the call's other tensors,
        which must not need autograd either)."""
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
        return dtype if (plain_cpu_inference(x, w, *others)
                         and packed_linear_supported(dtype)) else None

    def _packed_weight(self,
                       dtype: torch.dtype,
                       scale: Optional[torch.Tensor] = None,
                       halves: bool = False) -> tuple:
        """The packed ``(weight, bias)`` in ``dtype``: times ``scale`` per
        output channel when given, or
        with ``halves`` the two halves of the output channels packed apart
        (``(w1, b1, w2, b2)``, for SwiGLU). One packed copy is kept: a call
        of another kind repacks."""
        w, b = self.weight, self.bias
        key = (dtype, halves, _identity(w), None if b is None else
               _identity(b), None if scale is None else _identity(scale))
        packed = getattr(self, '_packed', None)
        if packed is None or packed[0] != key:
            self._packed = None  # the old copy goes before the new one
            with torch.no_grad():
                w, b = w.detach(), None if b is None else b.detach()
                if scale is not None:
                    s = scale.detach().float()
                    w = w.float() * s[:, None]
                    b = None if b is None else b.float() * s
                if halves:
                    b_halves = (None, None) if b is None else b.chunk(2)
                    payload = tuple(
                        t for w_half, b_half in zip(w.chunk(2), b_halves)
                        for t in _pack(w_half, b_half, dtype))
                else:
                    payload = _pack(w, b, dtype)
            packed = self._packed = (key, payload)
        return packed[1]

    def __getstate__(self):
        # The packed copy is an opaque oneDNN tensor: copies and pickles
        # (deepcopy, torch.save of the module) repack on demand instead.
        state = self.__dict__.copy()
        state['_packed'] = None
        return state

    def _apply(self, fn, recurse=True):
        self._packed = None  # .to(), .float(), .cuda()... repack on demand
        return super()._apply(fn, recurse)


def _pack(w: torch.Tensor, b: Optional[torch.Tensor],
          dtype: torch.dtype) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """A weight in oneDNN's blocked layout and its bias, in ``dtype``."""
    weight = torch.ops.mkldnn._reorder_linear_weight(
        w.to(dtype).contiguous())
    return weight, None if b is None else b.to(dtype).contiguous()


def _check_epilogue(activation: Optional[str],
                    scale: Optional[torch.Tensor]) -> None:
    if activation is not None and activation not in LINEAR_ACTIVATIONS:
        raise ValueError(f'Unknown linear activation {activation!r}: use '
                         f'None or one of {LINEAR_ACTIVATIONS}.')
    if scale is not None and activation is not None:
        raise ValueError('fused_linear: a scale applies to a linear output '
                         f'without activation; got activation {activation!r} '
                         'too.')


def _epilogue(y: torch.Tensor, activation: Optional[str],
              scale: Optional[torch.Tensor],
              residual: Optional[torch.Tensor]) -> torch.Tensor:
    """``residual + scale * activation(y)`` by PyTorch's ops (the
    definition the fused route follows)."""
    if activation == 'gelu':
        y = F.gelu(y)
    elif activation == 'gelu_tanh':
        y = F.gelu(y, approximate='tanh')
    elif activation == 'swiglu':
        y1, y2 = y.chunk(2, dim=-1)
        y = F.silu(y1) * y2
    if scale is not None:
        y = y * scale
    return y if residual is None else residual + y


def fused_linear(layer: nn.Linear,
                 x: torch.Tensor,
                 activation: Optional[str] = None,
                 scale: Optional[torch.Tensor] = None,
                 residual: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``residual + scale * activation(layer(x))``, fused into the GEMM
    where ``layer`` is a :class:`PackedCpuLinear` on its packed route (see
    :meth:`PackedCpuLinear.forward`), PyTorch's ops otherwise.

    The layer is called as a module (its hooks run, with ``x`` as their
    input and the fused result as their output).

    Raises:
        ValueError: An unknown ``activation``, or ``scale`` with an
            ``activation``.
    """
    if isinstance(layer, PackedCpuLinear):
        return layer(x, activation=activation, scale=scale,
                     residual=residual)
    _check_epilogue(activation, scale)
    return _epilogue(layer(x), activation, scale, residual)


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
