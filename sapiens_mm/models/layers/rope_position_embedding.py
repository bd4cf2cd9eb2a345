"""2D rotary position embedding of the Sapiens2 backbone.

Written from the Sapiens2 fact sheet (facebookresearch/sapiens2 @ 3098c14,
``RopePositionEmbedding`` with ``normalize_coords='separate'``, itself the
DINOv3 design). Every step runs in the RoPE dtype, bf16 by default *even in
an fp32 model*, because that is what the released models were trained and
evaluated with: the periods, the token coordinates, the angles, sin / cos and
the rotation of q and k (prefix tokens included, which are only cast to bf16
and back). "In bf16" is computed as float32 ops each rounded to bf16, which
gives the same bits as bf16 ops and exports to float-only runtimes.
"""
import math
from typing import Literal, Tuple

import torch
import torch.nn as nn

from sapiens_mm.tasks import ROPE_DTYPES
from sapiens_mm.utils.cpu_kernels import (
    kernel_route,
    rope_bf16,
    rope_fits,
    strided_like,
)

__all__ = ['RopePositionEmbedding', 'apply_rope', 'ROPE_DTYPES']



class RopePositionEmbedding(nn.Module):
    """Sin / cos tables of a 2D RoPE over a (H, W) patch grid.

    ``periods[k] = base ** (2k / (head_dims / 2))`` for ``k < head_dims / 4``
    (a persistent buffer, ``rope_embed.periods`` in the official state
    dict). Token (i, j) of the row-major grid has coordinates
    ``cy = 2 (i + 0.5) / H - 1`` and ``cx = 2 (j + 0.5) / W - 1``, so the
    coordinate range does not depend on the resolution and any grid works
    without interpolation. The angles ``2 pi c / period`` are laid out as
    (y frequencies, x frequencies), tiled twice to ``head_dims``.

    Args:
        head_dims: Per-head channels; a multiple of 4.
        base: Period base. Defaults to 100.
        rope_dtype: ``'bf16'`` (the official behaviour) or ``'fp32'``.

    The buffer keeps the RoPE dtype through ``load_state_dict`` and
    ``.to(device)``; if a cast such as ``model.float()`` changes it, the
    values are cast back to the RoPE dtype at use.
    """

    def __init__(self,
                 head_dims: int,
                 base: float = 100.0,
                 rope_dtype: Literal['bf16', 'fp32'] = 'bf16') -> None:
        super().__init__()
        if head_dims % 4:
            raise ValueError(
                f'RoPE needs head_dims divisible by 4, got {head_dims}: '
                'choose embed_dims divisible by 4 * num_heads.')
        if rope_dtype not in ROPE_DTYPES:
            raise ValueError(f'rope_dtype must be one of {sorted(ROPE_DTYPES)}'
                             f', got {rope_dtype!r}.')
        self.head_dims = head_dims
        self.base = base
        self.rope_dtype = rope_dtype
        self.dtype = ROPE_DTYPES[rope_dtype]
        self.register_buffer(
            'periods', self.default_periods(), persistent=True)

    def default_periods(self, device=None) -> torch.Tensor:
        """The initial periods, computed in the RoPE dtype: (head_dims/4,)."""
        k = torch.arange(self.head_dims // 4, device=device, dtype=self.dtype)
        return self.base**(2 * k / (self.head_dims // 2))

    def reset_parameters(self) -> None:
        """Refill ``periods`` with :meth:`default_periods`."""
        with torch.no_grad():
            self.periods.copy_(self.default_periods(self.periods.device))

    def forward(self, height: int,
                width: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """Sin and cos of every grid position.

        Args:
            height: Patch rows H.
            width: Patch columns W.

        Returns:
            ``(sin, cos)``, each (H * W, head_dims) in the RoPE dtype,
            row-major over the grid.
        """
        rnd = _rounding(self.dtype)
        device = self.periods.device
        cy = rnd(_arange_half(height, self.dtype, device) / height)
        cx = rnd(_arange_half(width, self.dtype, device) / width)
        coords = torch.stack(torch.meshgrid(cy, cx, indexing='ij'), dim=-1)
        coords = rnd(rnd(2.0 * coords.flatten(0, 1)) - 1.0)  # (HW, 2)
        periods = rnd(self.periods.float())
        angles = rnd(rnd(2 * math.pi * coords[:, :, None]) /
                     periods[None, None, :])
        angles = angles.flatten(1, 2).tile(2)  # (HW, head_dims)
        return torch.sin(angles).to(self.dtype), \
            torch.cos(angles).to(self.dtype)

    def extra_repr(self) -> str:
        return (f'head_dims={self.head_dims}, base={self.base}, '
                f'rope_dtype={self.rope_dtype!r}')


def _rounding(dtype: torch.dtype):
    """``x -> x`` rounded to ``dtype`` and back to float32.

    Computing an op in float32 and rounding its result is exactly what
    PyTorch's bf16 element-wise kernels do (CPU and CUDA compute in float
    and round once), so a chain of float32 ops, each followed by this
    rounding, gives the bits of the same chain in bf16. Unlike bf16 ops,
    it exports to ONNX runtimes that have float kernels only (a bf16 ``Mul``
    has no CPU kernel in ONNX Runtime).
    """
    if dtype == torch.float32:
        return lambda x: x
    return lambda x: x.to(dtype).float()


def _arange_half(n: int, dtype: torch.dtype,
                 device: torch.device) -> torch.Tensor:
    """``torch.arange(0.5, n, dtype=dtype)`` as float32. PyTorch's bf16
    ``arange`` differs from a rounded float32 one above 128.5 (its own
    rounding); up to there the float32 route is exact and exports."""
    if dtype == torch.float32 or n <= 129:
        return _rounding(dtype)(
            torch.arange(0.5, n, dtype=torch.float32, device=device))
    return torch.arange(0.5, n, dtype=dtype, device=device).float()


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(q: torch.Tensor, k: torch.Tensor,
               rope: Tuple[torch.Tensor, torch.Tensor]
               ) -> Tuple[torch.Tensor, torch.Tensor]:
    """Rotate the last ``rope[0].shape[0]`` tokens of q and k.

    As in the official model, all tokens (the unrotated prefix ones too) are
    rounded to the RoPE dtype, the rotation ``x cos + rotate_half(x) sin``
    runs in the RoPE dtype, and the result goes back to q's / k's dtype.

    Three routes give the same bits. Without autograd (inference, also
    under ``torch.compile`` and ``torch.export``), a C kernel rotates each
    row in one pass on CPUs with AVX512_BF16 (the custom op
    ``sapiens_mm::cpu_rope``,
    :func:`sapiens_mm.utils.cpu_kernels.rope_bf16`). Elsewhere, outside
    tracing, native ops in the RoPE dtype write both halves of the
    rotation straight into the output (no float32 round trips, no
    concatenations). Otherwise (training, tracing,
    :func:`~sapiens_mm.utils.cpu_kernels.pytorch_ops_only` exports) the
    arithmetic is float32 with a rounding after each op, which
    differentiates and exports to float-only runtimes (see
    :func:`_rounding`).

    Args:
        q: (B, heads, N, head_dims).
        k: (B, kv_heads, N, head_dims).
        rope: ``(sin, cos)`` from :class:`RopePositionEmbedding`, each
            (N - prefix, head_dims); their dtype is the RoPE dtype.

    Returns:
        The rotated ``(q, k)``, shapes and dtypes unchanged.
    """
    prefix = q.shape[-2] - rope[0].shape[-2]
    if prefix < 0:
        raise ValueError(f'RoPE tables cover {rope[0].shape[-2]} tokens but '
                         f'the sequence has only {q.shape[-2]}.')
    sin, cos = rope
    # On a CPU with AVX512_BF16: one pass of a C kernel, the same bits.
    if (kernel_route(q, k, sin, cos) and rope_fits(q, sin, cos, prefix)
            and rope_fits(k, sin, cos, prefix)):
        return (torch.ops.sapiens_mm.cpu_rope(q, sin, cos, prefix),
                torch.ops.sapiens_mm.cpu_rope(k, sin, cos, prefix))
    if _traced_or_differentiated(q, k, *rope):
        return _rotate_float(q, rope, prefix), _rotate_float(k, rope, prefix)
    sin_swapped = _swap_halves(sin)
    return (_rotate_native(q, sin_swapped, cos, prefix),
            _rotate_native(k, sin_swapped, cos, prefix))


def _swap_halves(sin: torch.Tensor) -> torch.Tensor:
    """``(s2 | s1)`` of ``sin = (s1 | s2)``: rotate_half(t) * sin ==
    (-t2 * s1 | t1 * s2), and t * (s2 | s1) == (t1 * s2 | t2 * s1) holds
    both products, each rounded once as in the official op."""
    half = sin.shape[-1] // 2
    return torch.cat((sin[..., half:], sin[..., :half]), dim=-1)


@torch.library.custom_op('sapiens_mm::cpu_rope', mutates_args=(),
                         device_types='cpu')
def _cpu_rope_op(x: torch.Tensor, sin: torch.Tensor, cos: torch.Tensor,
                 prefix: int) -> torch.Tensor:
    """``sapiens_mm::cpu_rope``: the bf16 rotation of the tokens after
    ``prefix`` by the C kernel, in x's dtype and memory order. Where the
    kernel cannot run (a graph recorded on another machine) the native
    ops compute the same bits."""
    out = rope_bf16(x, sin, cos, prefix)
    if out is None:
        out = strided_like(x)
        out.copy_(_rotate_native(x, _swap_halves(sin), cos, prefix))
    return out


@_cpu_rope_op.register_fake
def _cpu_rope_fake(x: torch.Tensor, sin: torch.Tensor, cos: torch.Tensor,
                   prefix: int) -> torch.Tensor:
    return strided_like(x)


def _traced_or_differentiated(*tensors: torch.Tensor) -> bool:
    """Whether autograd, ``torch.compile`` / export or TorchScript / ONNX
    tracing sees this call (the native route writes into ``out=``)."""
    return (torch.compiler.is_compiling() or torch.jit.is_tracing()
            or torch.jit.is_scripting() or torch.onnx.is_in_onnx_export()
            or (torch.is_grad_enabled()
                and any(t.requires_grad for t in tensors)))


def _rotate_native(x: torch.Tensor, sin_swapped: torch.Tensor,
                   cos: torch.Tensor, prefix: int) -> torch.Tensor:
    """The rotation with ops in the RoPE dtype, written into one new tensor
    of x's dtype: 2 products over the rotated tokens and 2 half-width sums
    (each op computes in float32 and rounds once, like the official bf16
    ops; the output cast follows)."""
    y = x.to(cos.dtype)  # x itself when it already is in the RoPE dtype
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    out[..., :prefix, :] = y[..., :prefix, :]
    tail = y[..., prefix:, :]
    a, b = tail * cos, tail * sin_swapped
    half = x.shape[-1] // 2
    rot = out[..., prefix:, :]
    torch.sub(a[..., :half], b[..., half:], out=rot[..., :half])
    torch.add(a[..., half:], b[..., :half], out=rot[..., half:])
    return out


def _rotate_float(x: torch.Tensor, rope: Tuple[torch.Tensor, torch.Tensor],
                  prefix: int) -> torch.Tensor:
    """The rotation as float32 ops each rounded to the RoPE dtype."""
    rnd = _rounding(rope[0].dtype)
    sin, cos = (t.float() for t in rope)
    y = rnd(x.float())
    head, tail = y[..., :prefix, :], y[..., prefix:, :]
    tail = rnd(rnd(tail * cos) + rnd(_rotate_half(tail) * sin))
    return torch.cat((head, tail), dim=-2).to(x.dtype)
