"""The pre-norm transformer block of Sapiens2 (and of its 4K tokenizer).

Written from the Sapiens2 fact sheet (facebookresearch/sapiens2 @ 3098c14).
"""
from typing import Optional, Tuple

import torch
import torch.nn as nn
from mmcv.cnn.bricks.drop import DropPath
from mmpretrain.models.utils import SwiGLUFFN

from sapiens_mm.utils.cpu_linear import fused_linear

from .grouped_query_attention import GroupedQueryAttention
from .rms_norm import RMSNorm

__all__ = ['Sapiens2TransformerBlock']


class Sapiens2TransformerBlock(nn.Module):
    """``x += attn(ln1(x))``, then ``x += ffn(ln2(x))``.

    Norms are ``nn.RMSNorm`` (weight only); the FFN is SwiGLU (``w12``
    C -> 2F, ``silu(first half) * second half``, ``w3`` F -> C, biases, no
    LayerScale); the attention is :class:`GroupedQueryAttention`.

    Args:
        embed_dims: Channels C.
        num_heads: Query heads.
        feedforward_channels: FFN hidden channels F.
        num_kv_heads: K/V heads (``None``: ``num_heads``).
        qk_norm: RMSNorm q and k. Defaults to True (the tokenizer: False).
        layer_scale_init_value: Initial attention LayerScale; 0: none.
            Defaults to 1e-4 (the tokenizer: 0).
        drop_path_rate: Stochastic depth of both branches. Defaults to 0.
        norm_eps: RMSNorm epsilon. Defaults to 1e-6.
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 feedforward_channels: int,
                 num_kv_heads: Optional[int] = None,
                 qk_norm: bool = True,
                 layer_scale_init_value: float = 1e-4,
                 drop_path_rate: float = 0.,
                 norm_eps: float = 1e-6) -> None:
        super().__init__()
        self.ln1 = RMSNorm(embed_dims, eps=norm_eps)
        self.attn = GroupedQueryAttention(
            embed_dims, num_heads, num_kv_heads=num_kv_heads,
            qk_norm=qk_norm, layer_scale_init_value=layer_scale_init_value,
            norm_eps=norm_eps)
        self.ln2 = RMSNorm(embed_dims, eps=norm_eps)
        self.ffn = SwiGLUFFN(
            embed_dims, feedforward_channels, add_identity=False,
            layer_scale_init_value=0.)
        # A plain float: numpy scalars make torch.compile guard on it.
        self.drop_path = DropPath(float(drop_path_rate)) \
            if drop_path_rate > 0 else nn.Identity()

    def forward(self,
                x: torch.Tensor,
                rope: Optional[Tuple[torch.Tensor, torch.Tensor]] = None
                ) -> torch.Tensor:
        """Args:
            x: (B, N, C).
            rope: ``(sin, cos)`` for the patch tokens, or None.

        Returns:
            (B, N, C).
        """
        if self.training:  # stochastic depth acts on the branches
            x = x + self.drop_path(self.attn(self.ln1(x), rope))
            return x + self.drop_path(self.ffn(self.ln2(x)))
        # The same sums with SwiGLU's gate and the FFN's residual add in
        # the GEMMs, the LayerScale with the attention's residual add in one
        # pass (linear layers in their inference form), PyTorch's ops
        # elsewhere: see sapiens_mm.utils.cpu_linear.fused_linear. The FFN
        # is built with no norm, LayerScale or dropout between its GEMMs.
        x = self.attn(self.ln1(x), rope, residual=x)
        hidden = fused_linear(self.ffn.w12, self.ln2(x), activation='swiglu')
        return fused_linear(self.ffn.w3, hidden, residual=x)
