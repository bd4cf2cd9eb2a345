"""The 4K tokenizer of Sapiens2 (``use_tokenizer=True``).

Written from the Sapiens2 fact sheet (facebookresearch/sapiens2 @ 3098c14).
"""
from typing import Tuple

import torch
import torch.nn as nn
import torch.utils.checkpoint as cp

from .sapiens2_transformer_block import Sapiens2TransformerBlock

__all__ = ['Sapiens2WindowTokenizer']


class Sapiens2WindowTokenizer(nn.Module):
    """Turn each 4x4 window of patch tokens into one token.

    The patch grid is cut into ``window x window`` windows (row-major
    windows, row-major inside). Each window gets the shared ``w_cls`` token
    prepended and ``local_pos_embed`` (1, 1 + window**2, C) added, runs
    through ``num_layers`` blocks (multi-head attention without QK-norm,
    LayerScale or RoPE) and is replaced by its CLS output.

    Args:
        embed_dims: Channels C.
        num_heads: Attention heads.
        feedforward_channels: FFN hidden channels.
        num_layers: Blocks per window.
        window: Window side in patches. Defaults to 4.
        chunk_size: Windows per pass (bounds memory only). Defaults to 1024.
        with_cp: Activation-checkpoint the blocks while training with
            gradients (the official model always does). Defaults to True.
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 feedforward_channels: int,
                 num_layers: int,
                 window: int = 4,
                 chunk_size: int = 1024,
                 with_cp: bool = True) -> None:
        super().__init__()
        self.window = window
        self.chunk_size = chunk_size
        self.with_cp = with_cp
        self.local_pos_embed = nn.Parameter(
            torch.zeros(1, 1 + window * window, embed_dims))
        self.w_cls = nn.Parameter(torch.zeros(1, 1, embed_dims))
        self.blocks = nn.ModuleList(
            Sapiens2TransformerBlock(
                embed_dims, num_heads, feedforward_channels, qk_norm=False,
                layer_scale_init_value=0.) for _ in range(num_layers))

    def _run(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.cat((self.w_cls.expand(x.shape[0], -1, -1), x), dim=1)
        x = x + self.local_pos_embed
        for block in self.blocks:
            if self.with_cp and self.training and torch.is_grad_enabled():
                x = cp.checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return x[:, 0]

    def forward(self, x: torch.Tensor, grid: Tuple[int, int]
                ) -> Tuple[torch.Tensor, Tuple[int, int]]:
        """Args:
            x: (B, H * W, C) row-major patch tokens.
            grid: (H, W), both multiples of ``window``.

        Returns:
            ``(tokens, (H / window, W / window))`` with tokens
            (B, H * W / window**2, C), row-major over the windows.
        """
        B, _, C = x.shape
        H, W = grid
        s = self.window
        if H % s or W % s:
            raise ValueError(
                f'The 4K tokenizer needs a patch grid divisible by {s}, got '
                f'{H}x{W}: use input sides that are multiples of '
                f'{s} x the patch size.')
        h, w = H // s, W // s
        x = x.reshape(B, h, s, w, s, C).permute(0, 1, 3, 2, 4, 5)
        x = x.reshape(B * h * w, s * s, C)
        out = torch.cat([
            self._run(x[i:i + self.chunk_size])
            for i in range(0, x.shape[0], self.chunk_size)
        ])
        return out.reshape(B, h * w, C), (h, w)
