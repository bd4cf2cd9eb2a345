"""Multi-head self-attention with grouped K/V heads, QK-norm, RoPE and
LayerScale: the attention of a Sapiens2 block.

Written from the Sapiens2 fact sheet (facebookresearch/sapiens2 @ 3098c14).
"""
from typing import Optional, Tuple

import torch
import torch.nn as nn
from mmpretrain.models.utils import LayerScale

from sapiens_mm.utils.cpu_linear import fused_linear
from sapiens_mm.utils.sdpa import scaled_dot_product_attention

from .rms_norm import RMSNorm
from .rope_position_embedding import apply_rope

__all__ = ['GroupedQueryAttention']


class GroupedQueryAttention(nn.Module):
    """Self-attention whose K/V may have fewer heads than Q (GQA).

    Steps: ``wq`` (C -> C) and ``wk`` / ``wv`` (C -> kv_heads * head_dims),
    all with bias; per-head RMSNorm of q and k (one weight shared by the
    heads); RoPE on the patch tokens; attention
    (:func:`sapiens_mm.utils.sdpa.scaled_dot_product_attention`)
    with scale 1/sqrt(head_dims), query head h reading K/V head
    ``h // (num_heads / num_kv_heads)``; ``proj`` (C -> C, bias); LayerScale
    ``gamma``.

    Args:
        embed_dims: Channels C.
        num_heads: Query heads; must divide C.
        num_kv_heads: K/V heads; must divide ``num_heads``. ``None``: as
            many as ``num_heads`` (plain multi-head attention).
        qk_norm: RMSNorm q and k per head. Defaults to True.
        layer_scale_init_value: Initial LayerScale; 0 disables it (no
            ``gamma`` weight). Defaults to 1e-4.
        norm_eps: RMSNorm epsilon. Defaults to 1e-6.

    Attributes:
        scaled_dot_product_attention: The attention function
            (:func:`sapiens_mm.utils.sdpa.scaled_dot_product_attention`:
            PyTorch's, or the C CPU kernel where it applies); an instance
            attribute so that tools such as the benchmark can record its
            calls.
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 num_kv_heads: Optional[int] = None,
                 qk_norm: bool = True,
                 layer_scale_init_value: float = 1e-4,
                 norm_eps: float = 1e-6) -> None:
        super().__init__()
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if embed_dims % num_heads:
            raise ValueError(f'num_heads ({num_heads}) must divide embed_dims '
                             f'({embed_dims}).')
        if num_kv_heads < 1 or num_heads % num_kv_heads:
            raise ValueError(f'num_kv_heads ({num_kv_heads}) must be a '
                             f'positive divisor of num_heads ({num_heads}).')
        self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dims = embed_dims // num_heads
        self.layer_scale_init_value = layer_scale_init_value
        kv_dims = num_kv_heads * self.head_dims
        self.wq = nn.Linear(embed_dims, embed_dims)
        self.wk = nn.Linear(embed_dims, kv_dims)
        self.wv = nn.Linear(embed_dims, kv_dims)
        if qk_norm:
            self.q_norm = RMSNorm(self.head_dims, eps=norm_eps)
            self.k_norm = RMSNorm(self.head_dims, eps=norm_eps)
        else:
            self.q_norm = self.k_norm = nn.Identity()
        self.proj = nn.Linear(embed_dims, embed_dims)
        self.gamma = LayerScale(embed_dims, layer_scale_init_value) \
            if layer_scale_init_value > 0 else nn.Identity()
        self.scaled_dot_product_attention = scaled_dot_product_attention

    def forward(self,
                x: torch.Tensor,
                rope: Optional[Tuple[torch.Tensor, torch.Tensor]] = None,
                residual: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Attend.

        Args:
            x: (B, N, C) tokens.
            rope: ``(sin, cos)`` (N_patch, head_dims) for the last N_patch
                tokens, or None for no RoPE.
            residual: (B, N, C) added to the output, or None. Given, the
                LayerScale and the add run in one pass after the output
                projection's GEMM, in the GEMM itself without a LayerScale
                (:func:`sapiens_mm.utils.cpu_linear.fused_linear`).

        Returns:
            (B, N, C).
        """
        B, N, C = x.shape
        hd = self.head_dims
        # The per-head norms before the transposes: rows of contiguous
        # memory for the norm kernels, the same values.
        q = self.q_norm(self.wq(x).view(B, N, self.num_heads, hd))
        k = self.k_norm(self.wk(x).view(B, N, self.num_kv_heads, hd))
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = self.wv(x).view(B, N, self.num_kv_heads, hd).transpose(1, 2)
        if rope is not None:
            q, k = apply_rope(q, k, rope)
        out = self.scaled_dot_product_attention(
            q, k, v, enable_gqa=self.num_kv_heads != self.num_heads)
        out = out.transpose(1, 2).reshape(B, N, C)
        if residual is None:
            return self.gamma(self.proj(out))
        scale = self.gamma.weight if isinstance(self.gamma, LayerScale) \
            else None
        return fused_linear(self.proj, out, scale=scale, residual=residual)

    def extra_repr(self) -> str:
        return (f'num_heads={self.num_heads}, '
                f'num_kv_heads={self.num_kv_heads}')
