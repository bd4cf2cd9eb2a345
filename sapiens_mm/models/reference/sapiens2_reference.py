"""A straightforward Sapiens2 encoder forward on a bare state dict.

Written directly from the Sapiens2 fact sheet (facebookresearch/sapiens2 @
3098c14), without any of the package's modules: the patch embedding as a
matrix product of unfolded patches, RMSNorm, RoPE and softmax attention
spelled out, GQA by explicit ``repeat_interleave`` of K/V. It is slower and
uses more memory than :class:`~sapiens_mm.models.Sapiens2VisionTransformer`
(it materialises the attention matrix) and exists to check that module and
to be timed against it (``tools/analysis/benchmark.py --arch sapiens2_*
--compare-stock``).
"""
import math
from typing import Dict, Optional, Sequence, Tuple

import torch
import torch.nn as nn

from sapiens_mm.tasks import ROPE_DTYPES

__all__ = ['sapiens2_reference_forward', 'Sapiens2Reference']

_EPS = 1e-6
_REGISTERS = 8


def _rms_norm(x: torch.Tensor, weight: Optional[torch.Tensor]) -> torch.Tensor:
    y = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + _EPS)
    return y if weight is None else y * weight


def _linear(x: torch.Tensor, w: Dict[str, torch.Tensor],
            name: str) -> torch.Tensor:
    return x @ w[name + '.weight'].t() + w[name + '.bias']


def _rope_tables(periods: torch.Tensor, rows: int, cols: int,
                 dtype: torch.dtype) -> Tuple[torch.Tensor, torch.Tensor]:
    """cos and sin, (rows * cols, head_dims), every step in ``dtype``."""
    periods = periods.to(dtype)
    cy = torch.arange(0.5, rows, dtype=dtype, device=periods.device) / rows
    cx = torch.arange(0.5, cols, dtype=dtype, device=periods.device) / cols
    cy = 2.0 * cy - 1.0
    cx = 2.0 * cx - 1.0
    # Token n = i * cols + j (row-major) has coordinates (cy[i], cx[j]).
    y = cy[:, None].expand(rows, cols).reshape(-1, 1)
    x = cx[None, :].expand(rows, cols).reshape(-1, 1)
    half = torch.cat((2 * math.pi * y / periods, 2 * math.pi * x / periods),
                     dim=1)  # (N, head_dims / 2): y freqs, then x freqs
    angles = torch.cat((half, half), dim=1)
    return torch.cos(angles), torch.sin(angles)


def _rotate(t: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
            num_prefix: int) -> torch.Tensor:
    """Rotate dims (i, i + d/2) of the patch tokens by their angle; the
    whole tensor goes through the RoPE dtype and back."""
    orig = t.dtype
    t = t.to(cos.dtype)
    prefix, patches = t[:, :, :num_prefix], t[:, :, num_prefix:]
    d = patches.shape[-1] // 2
    a, b = patches[..., :d], patches[..., d:]
    ca, cb = cos[:, :d], cos[:, d:]
    sa, sb = sin[:, :d], sin[:, d:]
    rotated = torch.cat((a * ca - b * sa, b * cb + a * sb), dim=-1)
    return torch.cat((prefix, rotated), dim=2).to(orig)


def _block(x: torch.Tensor, w: Dict[str, torch.Tensor], p: str,
           num_heads: int, rope: Optional[Tuple[torch.Tensor, torch.Tensor]],
           num_prefix: int) -> torch.Tensor:
    B, N, C = x.shape
    hd = C // num_heads
    h = _rms_norm(x, w[p + 'ln1.weight'])
    q = _linear(h, w, p + 'attn.wq')
    k = _linear(h, w, p + 'attn.wk')
    v = _linear(h, w, p + 'attn.wv')
    kv_heads = k.shape[-1] // hd
    q = q.reshape(B, N, num_heads, hd).permute(0, 2, 1, 3)
    k = k.reshape(B, N, kv_heads, hd).permute(0, 2, 1, 3)
    v = v.reshape(B, N, kv_heads, hd).permute(0, 2, 1, 3)
    if p + 'attn.q_norm.weight' in w:
        q = _rms_norm(q, w[p + 'attn.q_norm.weight'])
        k = _rms_norm(k, w[p + 'attn.k_norm.weight'])
    group = num_heads // kv_heads  # query head h reads K/V head h // group
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    if rope is not None:
        q = _rotate(q, *rope, num_prefix)
        k = _rotate(k, *rope, num_prefix)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
    attn = torch.softmax(scores.float(), dim=-1).to(v.dtype) @ v
    attn = attn.permute(0, 2, 1, 3).reshape(B, N, C)
    attn = _linear(attn, w, p + 'attn.proj')
    if p + 'attn.gamma.weight' in w:
        attn = attn * w[p + 'attn.gamma.weight']
    x = x + attn
    h = _linear(_rms_norm(x, w[p + 'ln2.weight']), w, p + 'ffn.w12')
    gate, value = h[..., :h.shape[-1] // 2], h[..., h.shape[-1] // 2:]
    h = gate * torch.sigmoid(gate) * value
    return x + _linear(h, w, p + 'ffn.w3')


def _num_blocks(w: Dict[str, torch.Tensor], prefix: str) -> int:
    n = 0
    while f'{prefix}{n}.ln1.weight' in w:
        n += 1
    return n


def sapiens2_reference_forward(
        weights: Dict[str, torch.Tensor],
        images: torch.Tensor,
        num_heads: int,
        rope_dtype: str = 'bf16',
        out_type: str = 'raw',
        out_indices: Sequence[int] = (-1, ),
        tokenizer_heads: Optional[int] = None) -> Tuple[torch.Tensor, ...]:
    """The Sapiens2 encoder on a flat backbone state dict.

    Args:
        weights: Official-layout backbone weights (``cls_token``,
            ``blocks.0.attn.wq.weight``, ...; ``tokenizer.*`` for the 4K
            model).
        images: (B, 3, H, W), H and W multiples of the patch size.
        num_heads: Query heads (K/V heads follow from the ``wk`` shapes).
        rope_dtype: ``'bf16'`` (official) or ``'fp32'``.
        out_type: ``'raw'`` (B, 9 + N, C), ``'featmap'`` (B, C, h, w) or
            ``'cls_token'`` (B, C).
        out_indices: Blocks to return (negative from the end).
        tokenizer_heads: Heads of the tokenizer blocks; defaults to
            ``num_heads``.

    Returns:
        One tensor per ``out_indices`` entry.
    """
    w = weights
    kernel = w['patch_embed.projection.weight']
    C, _, ph, pw = kernel.shape
    B, _, H, W = images.shape
    rows, cols = H // ph, W // pw
    patches = images.reshape(B, 3, rows, ph, cols, pw).permute(
        0, 2, 4, 1, 3, 5).reshape(B, rows * cols, 3 * ph * pw)
    x = patches @ kernel.reshape(C, -1).t() + w['patch_embed.projection.bias']
    if 'tokenizer.w_cls' in w:
        s = 4
        rows, cols = rows // s, cols // s
        win = x.reshape(B, rows, s, cols, s, C).permute(0, 1, 3, 2, 4, 5)
        win = win.reshape(B * rows * cols, s * s, C)
        win = torch.cat((w['tokenizer.w_cls'].expand(win.shape[0], 1, C), win),
                        dim=1) + w['tokenizer.local_pos_embed']
        for j in range(_num_blocks(w, 'tokenizer.blocks.')):
            win = _block(win, w, f'tokenizer.blocks.{j}.',
                         tokenizer_heads or num_heads, None, 0)
        x = win[:, 0].reshape(B, rows * cols, C)
    x = torch.cat((w['cls_token'].expand(B, 1, C),
                   w['storage_tokens'].expand(B, _REGISTERS, C), x), dim=1)
    rope = _rope_tables(w['rope_embed.periods'], rows, cols,
                        ROPE_DTYPES[rope_dtype])
    L = _num_blocks(w, 'blocks.')
    wanted = {i % L for i in out_indices}
    outs = []
    for i in range(L):
        x = _block(x, w, f'blocks.{i}.', num_heads, rope, 1 + _REGISTERS)
        if i == L - 1:
            x = _rms_norm(x, w['ln1.weight'])
        if i in wanted:
            if out_type == 'raw':
                outs.append(x)
            elif out_type == 'cls_token':
                outs.append(x[:, 0])
            else:
                outs.append(x[:, 1 + _REGISTERS:].transpose(1, 2).reshape(
                    B, C, rows, cols))
    return tuple(outs)


class Sapiens2Reference(nn.Module):
    """:func:`sapiens2_reference_forward` as a module holding the weights
    (as buffers), so that it moves and casts like a model.

    Args:
        weights: Official-layout backbone state dict (shared, not copied).
        num_heads: Query heads.
        rope_dtype: ``'bf16'`` or ``'fp32'``.
        out_type: As for the backbone.
        out_indices: As for the backbone.
    """

    def __init__(self, weights: Dict[str, torch.Tensor], num_heads: int,
                 rope_dtype: str = 'bf16', out_type: str = 'raw',
                 out_indices: Sequence[int] = (-1, )) -> None:
        super().__init__()
        self.keys = list(weights)
        for k, v in weights.items():
            self.register_buffer(k.replace('.', '__'), v.detach())
        self.num_heads = num_heads
        self.rope_dtype = rope_dtype
        self.out_type = out_type
        self.out_indices = tuple(out_indices)

    @classmethod
    def from_backbone(cls, backbone: nn.Module) -> 'Sapiens2Reference':
        """The reference with the weights and options of a
        :class:`~sapiens_mm.models.Sapiens2VisionTransformer`."""
        return cls(backbone.state_dict(), backbone.num_heads,
                   backbone.rope_dtype, backbone.out_type,
                   backbone.out_indices)

    def forward(self, images: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        """See :func:`sapiens2_reference_forward`."""
        weights = {k: getattr(self, k.replace('.', '__')) for k in self.keys}
        return sapiens2_reference_forward(weights, images, self.num_heads,
                                          self.rope_dtype, self.out_type,
                                          self.out_indices)
