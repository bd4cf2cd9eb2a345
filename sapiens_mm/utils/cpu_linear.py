"""The inference form of linear layers: weights packed once for the CPU.

``F.linear`` on a CPU hands the GEMM library (oneDNN for bf16, MKL for
float32) a plain weight matrix, which it reorders into its blocked layout on
every call; under ``torch.autocast`` PyTorch also casts every float32 weight
to bf16 on every call. A layer in its *inference form*
(:class:`PackedCpuLinear`) holds its weight only in oneDNN's blocked
layout, in the compute dtype, and calls oneDNN's matmul on it: measured on
the Sapiens shapes (AMD EPYC with AVX512_BF16, 2 threads) about 5 % faster
in bf16 and 20-25 % faster in float32 (oneDNN's float32 GEMM on a packed
weight against MKL's on a plain one), with no per-call weight cast under
autocast.

The form is explicit, like ``torch.jit.freeze`` or ``ipex.optimize``:
:func:`pack_cpu_linears` converts a model's plain linear layers, and the
packed tensor *replaces* the plain weight (no second copy: the memory of a
bf16 form is its weights in bf16). So that no computation can use weights
other than the current ones:

- the weight ``Parameter`` object stays the module's (optimisers, DDP and
  EMA copies keep their references) but holds no data while packed: it
  becomes a :class:`PackedParameter`, whose shape, dtype and device can be
  read and on which every tensor operation, ``.data`` included, raises
  :class:`PackedWeightError` (so ``.data`` writes, ``copy_``, an optimiser
  step or an EMA swap fail with a message instead of being lost);
  assigning a new ``weight`` raises too;
- ``load_state_dict`` repacks the weights it is given;
- ``state_dict()`` returns the unpacked weights (copies, in the weight's
  original dtype; made as inference tensors, so an in-place write to them
  raises instead of being lost);
- ``.train()``, moving or casting the module (``.to``, ``.float()``,
  ``.cuda()``...) and :func:`unpack_cpu_linears` convert back: the same
  ``Parameter`` object gets the unpacked weight again (exactly the values
  it had when the form computes in the weight's dtype; rounded to the
  compute dtype when that is narrower, e.g. bf16 for a float32 weight).

The form runs CPU inference only (no autograd through its input, no
tracing, compiling or exporting: those raise; use the plain model).

:func:`fused_linear` adds what a transformer block does right after a
linear layer (GELU, SwiGLU's gate, the residual add) to the GEMM itself on
the packed route, as oneDNN post-ops on the tile just computed, instead of
one more pass over the output in memory each: a float32 Sapiens2 layer
spends about 45 ms of its 830 ms in SwiGLU's ``silu`` and ``mul`` alone
(AMD EPYC, 2 threads, 1024x768), about 10 ms fused. A LayerScale is applied
with the residual add in one pass after the GEMM (``torch.addcmul``): folded
into the packed weight it would tie the packed tensor to another module's
parameter.
"""
import contextlib
from collections import Counter
from typing import Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from mmcv.cnn.bricks.wrappers import Linear as MMCVLinear

from .cpu_features import packed_linear_supported
from .cpu_kernels import plain_cpu_inference

__all__ = ['PackedCpuLinear', 'PackedMMCVLinear', 'PackedParameter',
           'PackedWeightError', 'pack_cpu_linears', 'unpack_cpu_linears',
           'packed_weight_bytes', 'fused_linear', 'LINEAR_ACTIVATIONS']

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

_HOW_TO_WRITE = (
    'This linear weight is packed for CPU inference (the inference form of '
    'sapiens_mm.apis.optimize_for_inference): it has no plain tensor to '
    'read or write. Load new weights with model.load_state_dict(), or '
    'convert the model back first with model.train() (or '
    'sapiens_mm.utils.cpu_linear.unpack_cpu_linears(model) to stay in eval '
    'mode).')


class PackedWeightError(RuntimeError):
    """An operation on a weight that is packed in the inference form."""


# Metadata a PackedParameter answers (no data is read or written).
_PROPERTIES = ('shape', 'dtype', 'device', 'layout', 'ndim', 'is_leaf',
               'requires_grad', 'grad', 'grad_fn', 'is_cuda', 'is_cpu',
               'is_meta', 'is_sparse', 'is_quantized', 'is_mkldnn',
               'is_nested', 'names', 'output_nr', '_version', '_base',
               '_cdata')
_METHODS = ('size', 'dim', 'numel', 'nelement', 'element_size',
            'is_floating_point', 'is_complex', 'is_contiguous', 'get_device',
            'requires_grad_', '__hash__', '__len__')


def _allowed_functions() -> frozenset:
    allowed = set()
    for name in _PROPERTIES:
        attr = getattr(torch.Tensor, name, None)
        for accessor in ('__get__', '__set__'):
            fn = getattr(attr, accessor, None)
            # setters of the flags only: requires_grad and grad
            if fn is not None and (accessor == '__get__'
                                   or name in ('requires_grad', 'grad')):
                allowed.add(fn)
    allowed.update(getattr(torch.Tensor, name) for name in _METHODS
                   if hasattr(torch.Tensor, name))
    return frozenset(allowed)


_ALLOWED = _allowed_functions()


class PackedParameter(nn.Parameter):
    """What a linear layer's weight ``Parameter`` is while the layer is in
    its inference form: the same object (an optimiser, DDP or an EMA model
    keeps its reference), with its shape, dtype and device, no data, and
    every tensor operation refused with :class:`PackedWeightError`.

    Not created directly: :func:`pack_cpu_linears` changes the class of
    the weight in place and :func:`unpack_cpu_linears` changes it back.
    """

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in _ALLOWED:
            with torch._C.DisableTorchFunctionSubclass():
                return func(*args, **(kwargs or {}))
        name = getattr(func, '__name__', str(func))
        owner = getattr(func, '__self__', None)  # a property's accessor
        if name in ('__get__', '__set__') and hasattr(owner, '__name__'):
            name = ('reading .' if name == '__get__' else 'setting .') + \
                owner.__name__
        raise PackedWeightError(f'{name} on a packed weight: '
                                f'{_HOW_TO_WRITE}')

    def __repr__(self) -> str:
        return (f'PackedParameter(shape={tuple(self.shape)}, '
                f'dtype={self.dtype}: packed for CPU inference)')

    def __deepcopy__(self, memo):
        copy = _placeholder(self)
        memo[id(self)] = copy
        return copy

    def __reduce_ex__(self, protocol):
        raise PackedWeightError(
            'A model in its inference form cannot be pickled: save its '
            'state_dict() (the unpacked weights) instead.')


def _placeholder(weight: torch.Tensor) -> PackedParameter:
    """A new data-less :class:`PackedParameter` like ``weight``."""
    with torch._C.DisableTorchFunctionSubclass():
        shape, dtype = tuple(weight.shape), weight.dtype
        grad = weight.requires_grad
    param = nn.Parameter(torch.zeros((), dtype=dtype).expand(shape), grad)
    param.__class__ = PackedParameter
    return param


def _pack(weight: torch.Tensor, dtype: torch.dtype,
          halves: bool) -> Tuple[torch.Tensor, ...]:
    """``weight`` (out, in) in oneDNN's blocked layout in ``dtype``: one
    tensor, or with ``halves`` the two halves of the output channels
    packed apart (SwiGLU's gate and value)."""
    with torch.no_grad(), torch.inference_mode(False):
        w = weight.detach().to('cpu', dtype)
        parts = w.chunk(2) if halves else (w, )
        return tuple(
            torch.ops.mkldnn._reorder_linear_weight(p.contiguous())
            for p in parts)


class PackedCpuLinear(nn.Linear):
    """The inference form of ``nn.Linear``: its weight only as a packed
    oneDNN tensor in the compute dtype (see the module docstring for how
    writes, state dicts and training are handled).

    The forward computes in the form's dtype
    (:attr:`packed_dtype`): the input is cast to it; the output has that
    dtype under ``torch.autocast`` and the input's dtype otherwise (so a
    bf16 form runs inside a float32 model). It gives ``F.linear``'s result
    up to the order of the float32 accumulation (oneDNN's blocking instead
    of MKL's): measured, one bf16 step in under 1 % of the bf16 outputs,
    float32 outputs within 1e-6 relative.

    Modules become this class through :func:`pack_cpu_linears`; the
    state-dict keys stay those of ``nn.Linear``.

    Raises:
        PackedWeightError: A call that is not plain CPU inference (autograd
            through the input, tracing, compiling, exporting, a tensor on
            another device), or an assignment to ``weight``.
    """

    #: The compute dtype of the packed weight.
    packed_dtype: torch.dtype
    _packed: Tuple[torch.Tensor, ...]
    _halves: bool
    _plain_class: type

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

        The activation and, without a scale and where its dtype is the
        output's, the residual are computed on the GEMM's output tile by
        oneDNN; a scale with the residual add in one pass after it. The
        results agree with the PyTorch ops of the formula up to float32
        rounding (oneDNN's GELU / SiLU; in bf16 the linear output is not
        rounded before the activation or the residual add, one rounding
        instead of two).
        """
        _check_epilogue(activation, scale)
        others = tuple(t for t in (scale, residual) if t is not None)
        if not plain_cpu_inference(x, *others):
            raise PackedWeightError(
                'A linear layer in its inference form runs CPU inference '
                'only (no autograd through its input, tracing, compiling or '
                'exporting, no tensor on another device): run the plain '
                'model for that (model.train(), or sapiens_mm.utils.'
                'cpu_linear.unpack_cpu_linears(model)).')
        dtype = self.packed_dtype
        out_dtype = dtype if torch.is_autocast_enabled('cpu') else x.dtype
        xin = x.to(dtype)
        bias = None if self.bias is None else self.bias.detach().to(dtype)
        if activation == 'swiglu':
            w1, w2 = self._weights(halves=True)
            b1, b2 = (None, None) if bias is None else bias.chunk(2)
            gate = torch.ops.mkldnn._linear_pointwise(xin, w1, b1, 'swish',
                                                      [], '')
            y = torch.ops.mkldnn._linear_pointwise.binary(
                xin, gate, w2, b2, 'mul').to(out_dtype)
            return y if residual is None else residual + y
        weight, = self._weights(halves=False)
        if (residual is not None and activation is None and scale is None
                and residual.dtype == dtype == out_dtype
                and residual.is_contiguous()
                and residual.shape == x.shape[:-1] + (self.out_features, )):
            return torch.ops.mkldnn._linear_pointwise.binary(
                xin, residual, weight, bias, 'add')
        attr, algorithm = _ONEDNN_ACTIVATIONS[activation]
        y = torch.ops.mkldnn._linear_pointwise(xin, weight, bias, attr, [],
                                               algorithm).to(out_dtype)
        return _epilogue(y, None, scale, residual)

    def _weights(self, halves: bool) -> Tuple[torch.Tensor, ...]:
        """The packed weight in the layout a call needs: whole, or (with
        ``halves``) its two halves of output channels. A layer packs in
        the layout it is called with; the other layout is made from it (and
        replaces it) the first time it is asked for."""
        if self._halves != halves:
            dense = self._dense()
            self._packed = ()  # the old layout goes before the new one
            self._packed = _pack(dense, self.packed_dtype, halves)
            self._halves = halves
        return self._packed

    def _dense(self) -> torch.Tensor:
        """The weight unpacked: (out, in), plain layout, compute dtype."""
        parts = [p.to_dense() for p in self._packed]
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def packed_nbytes(self) -> int:
        """Bytes of the packed weight (its logical size in the compute
        dtype)."""
        return sum(p.numel() * p.element_size() for p in self._packed)

    @contextlib.contextmanager
    def _weight_hidden(self):
        """``weight`` out of ``_parameters`` (for nn.Module's own state-dict
        code, which would read the placeholder), back in its place
        after."""
        params = self._parameters
        order = list(params)
        placeholder = params.pop('weight')
        try:
            yield
        finally:
            current = dict(params, weight=placeholder)
            params.clear()
            params.update((k, current.pop(k)) for k in order if k in current)
            params.update(current)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        with torch.inference_mode():  # a write to the copy raises
            destination[prefix + 'weight'] = self._dense().to(
                self.weight.dtype)
        with self._weight_hidden():
            super()._save_to_state_dict(destination, prefix, keep_vars)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata,
                              strict, missing_keys, unexpected_keys,
                              error_msgs):
        key = prefix + 'weight'
        with self._weight_hidden():
            super()._load_from_state_dict(state_dict, prefix, local_metadata,
                                          strict, missing_keys,
                                          unexpected_keys, error_msgs)
        if key in unexpected_keys:
            unexpected_keys.remove(key)
        if key not in state_dict:
            if strict:
                missing_keys.append(key)
            return
        value = state_dict[key]
        shape = torch.Size((self.out_features, self.in_features))
        if not isinstance(value, torch.Tensor):
            error_msgs.append(f'While copying the parameter named "{key}", '
                              'expected torch.Tensor or Tensor-like object '
                              f'from checkpoint but received {type(value)}')
        elif value.shape != shape:
            error_msgs.append(
                f'size mismatch for {key}: copying a param with shape '
                f'{value.shape} from checkpoint, the shape in current model '
                f'is {shape}.')
        else:
            self._packed = ()  # the old weight goes before the new one
            self._packed = _pack(value, self.packed_dtype, self._halves)

    def __setattr__(self, name, value):
        if name == 'weight':
            raise PackedWeightError(f'Assigning weight: {_HOW_TO_WRITE}')
        super().__setattr__(name, value)

    def train(self, mode: bool = True):
        if not mode:
            return super().train(False)
        _unpack(self)  # now the plain class
        return self.train(True)

    def _apply(self, fn, recurse=True):
        _unpack(self)  # .to(), .float(), .cuda()... act on the plain layer
        return self._apply(fn, recurse)

    def __getstate__(self):
        # The packed tensors are opaque oneDNN tensors: a deep copy carries
        # the unpacked weight and repacks it (pickling is refused by
        # PackedParameter).
        state = self.__dict__.copy()
        state['_packed'] = ()
        state['_unpacked'] = self._dense()
        return state

    def __setstate__(self, state):
        dense = state.pop('_unpacked')
        super().__setstate__(state)
        self._packed = _pack(dense, self.packed_dtype, self._halves)

    def extra_repr(self) -> str:
        return (f'{super().extra_repr()}, packed '
                f'{str(self.packed_dtype)[6:]}')


class PackedMMCVLinear(PackedCpuLinear, MMCVLinear):
    """The inference form of mmcv's ``Linear`` (the one mmcv's and
    mmpretrain's FFNs build), with :class:`PackedCpuLinear`'s forward."""


# plain class -> its inference form
_PACKED_CLASSES = {nn.Linear: PackedCpuLinear, MMCVLinear: PackedMMCVLinear}


def _packable(module: nn.Module, dtype: Optional[torch.dtype]
              ) -> Optional[torch.dtype]:
    """The dtype ``module`` packs in, or None when it stays plain: not a
    plain ``nn.Linear`` / mmcv ``Linear``, a weight that is not a plain
    float CPU ``Parameter``, or a dtype oneDNN cannot pack here."""
    if type(module) not in _PACKED_CLASSES:
        return None
    weight = module._parameters.get('weight')
    if type(weight) is not nn.Parameter or weight.device.type != 'cpu' \
            or not weight.is_floating_point():
        return None
    dtype = dtype or weight.dtype
    return dtype if packed_linear_supported(dtype) else None


def pack_cpu_linears(model: nn.Module,
                     dtype: Optional[torch.dtype] = None) -> int:
    """Convert every plain linear layer of ``model`` (``nn.Linear`` and
    mmcv's ``Linear``, not their subclasses: quantised, LoRA...) whose
    weight is on the CPU into its inference form
    (:class:`PackedCpuLinear`), in place: each weight is packed now, in
    ``dtype``, and its plain data freed.

    Args:
        model: The model (its other modules are left as they are).
        dtype: The compute dtype (``torch.float32``, ``torch.bfloat16``...);
            None: each weight's own dtype. A layer whose dtype oneDNN cannot
            pack on this CPU stays plain
            (:func:`~sapiens_mm.utils.cpu_features.packed_linear_supported`).

    Returns:
        The number of layers converted.
    """
    # a weight tied to another module's stays plain (the other module
    # would find no data in it)
    uses = Counter(id(p) for _, p in model.named_parameters(
        remove_duplicate=False))
    count = 0
    for module in list(model.modules()):
        packed_dtype = _packable(module, dtype)
        if packed_dtype is None or uses[id(module.weight)] > 1:
            continue
        weight = module.weight
        packed = _pack(weight, packed_dtype, halves=False)
        plain_class = type(module)
        module._packed = packed
        module._halves = False
        module.packed_dtype = packed_dtype
        module._plain_class = plain_class
        # the Parameter object stays; its data goes
        weight.data = torch.zeros((), dtype=weight.dtype).expand(
            weight.shape)
        weight.__class__ = PackedParameter
        module.__class__ = _PACKED_CLASSES[plain_class]
        count += 1
    return count


def _unpack(module: PackedCpuLinear) -> None:
    """``module`` back to its plain class, its weight ``Parameter`` (the
    same object) holding the unpacked weight in its own dtype."""
    weight = module._parameters['weight']
    with torch.no_grad(), torch.inference_mode(False):
        dense = module._dense()
        weight.__class__ = nn.Parameter
        weight.data = dense.to(weight.dtype, copy=dense.is_inference())
    plain_class = module._plain_class
    for name in ('_packed', '_halves', 'packed_dtype', '_plain_class'):
        module.__dict__.pop(name, None)
    module.__class__ = plain_class


def unpack_cpu_linears(model: nn.Module) -> int:
    """Undo :func:`pack_cpu_linears`: every linear layer of ``model`` in
    its inference form becomes plain again (``model.train()`` does this
    too, and also leaves eval mode). Returns the number of layers
    converted."""
    layers = [m for m in model.modules() if isinstance(m, PackedCpuLinear)]
    for module in layers:
        _unpack(module)
    return len(layers)


def packed_weight_bytes(model: nn.Module) -> int:
    """Bytes of the packed weights of ``model``'s linear layers in the
    inference form (0 when none is)."""
    return sum(m.packed_nbytes() for m in model.modules()
               if isinstance(m, PackedCpuLinear))


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
    definition the fused route follows; a scale and a residual in one
    ``addcmul`` pass)."""
    if activation == 'gelu':
        y = F.gelu(y)
    elif activation == 'gelu_tanh':
        y = F.gelu(y, approximate='tanh')
    elif activation == 'swiglu':
        y1, y2 = y.chunk(2, dim=-1)
        y = F.silu(y1) * y2
    if scale is not None and residual is not None:
        return torch.addcmul(residual, y, scale)
    if scale is not None:
        y = y * scale
    return y if residual is None else residual + y


def fused_linear(layer: nn.Linear,
                 x: torch.Tensor,
                 activation: Optional[str] = None,
                 scale: Optional[torch.Tensor] = None,
                 residual: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``residual + scale * activation(layer(x))``, fused into the GEMM
    where ``layer`` is in its inference form (see
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

