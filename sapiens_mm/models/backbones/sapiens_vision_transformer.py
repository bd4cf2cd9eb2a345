"""Sapiens Vision Transformer, a thin subclass of mmpretrain's ViT.

The module tree (and so every state-dict key) is mmpretrain's
``VisionTransformer``, which is what the official Sapiens checkpoints were
saved from. This subclass adds the Sapiens ``arch_zoo``, fine-tuning defaults
(1024x768 input, no cls token, ``featmap`` output), activation checkpointing,
and a ``pos_embed`` load hook that turns a pretraining embedding (cls token +
64x64 grid) into the fine-tuning grid.
"""
import math
from typing import Literal, Optional, Sequence, Tuple, Union

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as cp
from mmengine.logging import print_log
from mmcv.cnn.bricks.transformer import FFN
from mmpretrain.models.backbones import VisionTransformer
from mmpretrain.models.backbones.vision_transformer import \
    TransformerEncoderLayer
from mmpretrain.models.utils import MultiheadAttention, resize_pos_embed
from mmpretrain.registry import MODELS

from sapiens_mm.utils.cpu_linear import fused_linear
from sapiens_mm.utils.sdpa import scaled_dot_product_attention

from ..layers import PatchConv2d


def _arch(embed_dims: int, num_layers: int, num_heads: int,
          feedforward_channels: int) -> dict:
    return dict(
        embed_dims=embed_dims,
        num_layers=num_layers,
        num_heads=num_heads,
        feedforward_channels=feedforward_channels)


def _grid_for(num_tokens: int, target: Tuple[int, int]) -> Tuple[int, int]:
    """Guess the (H, W) patch grid a flat ``pos_embed`` of length L was
    trained on: a square grid if L is a perfect square, else the grid with the
    aspect ratio of ``target``."""
    side = math.isqrt(num_tokens)
    if side * side == num_tokens:
        return side, side
    th, tw = target
    for h in range(1, num_tokens + 1):
        if num_tokens % h == 0 and h * tw == (num_tokens // h) * th:
            return h, num_tokens // h
    raise ValueError(
        f'Cannot infer the patch grid of a pos_embed with {num_tokens} '
        f'tokens: it is neither square nor of the model grid aspect {target}. '
        'Resize it yourself with mmpretrain.models.utils.resize_pos_embed '
        'before loading.')


class _InferenceGELU(nn.GELU):
    """``nn.GELU`` that overwrites its input when no gradient is recorded.

    In the FFN the input is the first linear layer's fresh output (tokens x
    4C), so inference saves allocating, page-faulting and writing one such
    tensor per layer. Training (gradients on) runs the usual out-of-place
    op; the result is the same either way.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled() and x.requires_grad:
            return super().forward(x)
        return torch.ops.aten.gelu_(x, approximate=self.approximate)


class _FusedEncoderLayer(TransformerEncoderLayer):
    """mmpretrain's encoder layer whose inference runs the FFN's GELU and
    both residual adds inside the GEMMs
    (:func:`sapiens_mm.utils.cpu_linear.fused_linear`: oneDNN post-ops on
    packed CPU inference, PyTorch's ops elsewhere): the same sums, without
    three passes over a tokens x C or tokens x 4C tensor per layer.

    Training runs mmpretrain's forward (dropout and stochastic depth act
    there). Layers with a LayerScale, a value shortcut or another FFN are
    not given this class (:meth:`fusable`).
    """

    @staticmethod
    def fusable(layer: nn.Module) -> bool:
        """Whether ``layer`` is the plain pre-norm layer this forward
        computes: qkv attention without LayerScale or value shortcut, a
        two-GEMM GELU FFN that adds its input, no LayerScale."""
        attn, ffn = getattr(layer, 'attn', None), getattr(layer, 'ffn', None)
        if (type(layer) is not TransformerEncoderLayer
                or type(attn) is not MultiheadAttention
                or type(ffn) is not FFN or attn.v_shortcut
                or not isinstance(attn.gamma1, nn.Identity)
                or not isinstance(ffn.gamma2, nn.Identity)
                or not ffn.add_identity or ffn.num_fcs != 2):
            return False
        act = ffn.layers[0][1]
        return isinstance(act, nn.GELU) and act.approximate in ('none',
                                                                 'tanh')

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            return super().forward(x)
        attn, ffn = self.attn, self.ffn
        B, N, _ = x.shape
        qkv = attn.qkv(self.ln1(x)).reshape(B, N, 3, attn.num_heads,
                                            attn.head_dims).permute(
                                                2, 0, 3, 1, 4)
        out = attn.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2],
                                                dropout_p=0.)
        out = out.transpose(1, 2).reshape(B, N, attn.embed_dims)
        x = fused_linear(attn.proj, out, residual=x)
        fc1, act = ffn.layers[0][0], ffn.layers[0][1]
        hidden = fused_linear(
            fc1, self.ln2(x),
            activation='gelu' if act.approximate == 'none' else 'gelu_tanh')
        return fused_linear(ffn.layers[1], hidden, residual=x)


@MODELS.register_module()
class SapiensVisionTransformer(VisionTransformer):
    """Sapiens ViT backbone (Khirodkar et al., ECCV 2024).

    Pre-norm ViT with LayerNorm(eps=1e-6), qkv bias, GELU FFN, no layer
    scale, final LayerNorm ``ln1`` applied after the last layer only.

    Args:
        arch: ``'sapiens_0.3b' | 'sapiens_0.6b' | 'sapiens_1b' |
            'sapiens_2b' | 'sapiens_tiny'`` (aliases ``'0.3b'``, ...), or a
            dict with ``embed_dims``, ``num_layers``, ``num_heads`` and
            ``feedforward_channels``.
        img_size: (H, W) the ``pos_embed`` grid is built for. Other input
            sizes work: ``pos_embed`` is resized at forward time.
            Defaults to (1024, 768), the fine-tuning size.
        patch_size: Patch size. Defaults to 16.
        out_indices: Layers whose output is returned (negative counts from
            the end). Only the last layer's output is final-normed, as in
            the official model. Defaults to -1.
        out_type: ``'featmap'`` (B, C, H/16, W/16), ``'raw'`` (B, L, C),
            ``'cls_token'`` (B, C) or ``'avg_featmap'`` (B, C).
            Defaults to ``'featmap'``.
        with_cls_token: Whether to prepend a cls token. Defaults to False
            (fine-tuning); MAE pretraining uses True.
        with_cp: Activation checkpointing of every encoder layer while
            training, trading compute for memory. Defaults to False.
        patch_cfg: Extra ``PatchEmbed`` options; pose and normal configs use
            ``dict(padding=2)``.
        **kwargs: Passed to mmpretrain's ``VisionTransformer``
            (``drop_path_rate``, ``frozen_stages``, ``final_norm``,
            ``init_cfg``...).

    Loading ``init_cfg=dict(type='Pretrained', checkpoint=...)`` goes through
    :func:`sapiens_mm.checkpoint.load_checkpoint` with strict key checks; the
    checkpoint may be a flat backbone state dict (official ``*_clean.pth``)
    or a full model checkpoint whose backbone keys start with ``backbone.``.
    """
    arch_zoo = {
        **dict.fromkeys(['sapiens_0.3b', '0.3b'], _arch(1024, 24, 16, 4096)),
        **dict.fromkeys(['sapiens_0.6b', '0.6b'], _arch(1280, 32, 16, 5120)),
        **dict.fromkeys(['sapiens_1b', '1b'], _arch(1536, 40, 24, 6144)),
        **dict.fromkeys(['sapiens_2b', '2b'], _arch(1920, 48, 32, 7680)),
        # For tests and quick runs; not a released size.
        **dict.fromkeys(['sapiens_tiny', 'tiny'], _arch(64, 2, 2, 128)),
    }

    def __init__(self,
                 arch: Union[str, dict] = 'sapiens_0.3b',
                 img_size: Union[int, Tuple[int, int]] = (1024, 768),
                 patch_size: int = 16,
                 out_indices: Union[int, Sequence[int]] = -1,
                 out_type: Literal['featmap', 'raw', 'cls_token',
                                   'avg_featmap'] = 'featmap',
                 with_cls_token: bool = False,
                 with_cp: bool = False,
                 patch_cfg: Optional[dict] = None,
                 **kwargs) -> None:
        if isinstance(arch, str) and arch.lower() not in self.arch_zoo:
            raise ValueError(
                f'Unknown Sapiens arch {arch!r}; choose one of '
                f'{sorted(self.arch_zoo)} or pass a dict with embed_dims, '
                'num_layers, num_heads and feedforward_channels.')
        if isinstance(out_indices, int):
            out_indices = [out_indices]
        super().__init__(
            arch=arch,
            img_size=img_size,
            patch_size=patch_size,
            out_indices=list(out_indices),
            out_type=out_type,
            with_cls_token=with_cls_token,
            patch_cfg=dict(patch_cfg or {}),
            **kwargs)
        self.with_cp = with_cp
        # mmpretrain spreads the stochastic-depth rates with np.linspace:
        # numpy scalars make torch.compile guard on (and, under
        # inference_mode, fail on) ``drop_prob``. Plain floats behave the
        # same in eager mode.
        for module in self.modules():
            if isinstance(getattr(module, 'drop_prob', None), np.generic):
                module.drop_prob = float(module.drop_prob)
        # Patch embedding as one GEMM where PyTorch's reduced-precision CPU
        # convolution is slow (same parameters and state dict).
        proj = self.patch_embed.projection
        if type(proj) is nn.Conv2d:
            proj.__class__ = PatchConv2d
        # The FFN activations work in place at inference (no parameters:
        # state dicts are unchanged). The layers given _FusedEncoderLayer
        # below run GELU in the GEMM instead; this serves the others (with
        # LayerScale, a value shortcut...).
        for layer in self.layers:
            for parent in layer.ffn.modules():
                for name, child in parent.named_children():
                    if type(child) is nn.GELU:
                        setattr(parent, name,
                                _InferenceGELU(approximate=child.approximate))
        # Attention through sapiens_mm's dispatcher: PyTorch's kernel, or
        # the C CPU kernel (bf16 or float32) where it applies.
        for layer in self.layers:
            if getattr(layer.attn, 'scaled_dot_product_attention',
                       None) is F.scaled_dot_product_attention:
                layer.attn.scaled_dot_product_attention = \
                    scaled_dot_product_attention
        # Inference with the GELU and residual adds in the GEMMs (same
        # modules and state dict).
        for layer in self.layers:
            if _FusedEncoderLayer.fusable(layer):
                layer.__class__ = _FusedEncoderLayer

    # ------------------------------------------------------------------ init
    def init_weights(self) -> None:
        init_cfg = self.init_cfg
        if isinstance(init_cfg, dict) and init_cfg.get('type') == 'Pretrained':
            from sapiens_mm.checkpoint import load_backbone_checkpoint
            load_backbone_checkpoint(
                self, init_cfg['checkpoint'], prefix=init_cfg.get('prefix'))
            self._is_init = True
            return
        super().init_weights()

    def _prepare_pos_embed(self, state_dict, prefix, *args, **kwargs) -> None:
        """Adapt a checkpoint ``pos_embed`` to this model before loading.

        A pretraining embedding (1, 1 + 64*64, C) loses its cls token when the
        model has none, and any grid is resized bicubically (in float32) to
        ``patch_embed.init_out_size``.
        """
        name = prefix + 'pos_embed'
        if name not in state_dict:
            return
        pos = state_dict[name]
        own_len = self.pos_embed.shape[1]
        if not self.with_cls_token and pos.shape[1] != own_len and (
                pos.shape[1] == own_len + 1 or pos.shape[1] % 2 == 1):
            pos = pos[:, 1:]
        if pos.shape != self.pos_embed.shape:
            src = _grid_for(pos.shape[1] - self.num_extra_tokens,
                            self.patch_resolution)
            print_log(
                f'Resize pos_embed from {tuple(state_dict[name].shape)} '
                f'(grid {src}) to {tuple(self.pos_embed.shape)} '
                f'(grid {tuple(self.patch_resolution)}).',
                logger='current')
            dtype = pos.dtype
            pos = resize_pos_embed(
                pos.float(), src, self.patch_resolution,
                mode=self.interpolate_mode,
                num_extra_tokens=self.num_extra_tokens).to(dtype)
        state_dict[name] = pos

    def _freeze_stages(self) -> None:
        """Freeze the embeddings and the first ``frozen_stages`` layers
        (mmpretrain's version assumes a cls token)."""
        frozen = [self.patch_embed, self.pre_norm, self.drop_after_pos]
        frozen += list(self.layers[:self.frozen_stages])
        if self.frozen_stages == len(self.layers) and self.final_norm:
            frozen.append(self.ln1)
        for module in frozen:
            module.eval()
            for param in module.parameters():
                param.requires_grad = False
        for param in (self.pos_embed, self.cls_token):
            if param is not None:
                param.requires_grad = False

    def train(self, mode: bool = True) -> 'SapiensVisionTransformer':
        """Set train / eval mode, keeping frozen stages in eval mode.

        Returns ``self`` (mmpretrain's backbone returns None, which breaks
        ``model = backbone.eval()``).
        """
        super().train(mode)
        if mode and self.frozen_stages > 0:
            self._freeze_stages()
        return self

    # --------------------------------------------------------------- forward
    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        """Encode images.

        Args:
            x: (B, 3, H, W) normalised images. H and W need not match
                ``img_size``.

        Returns:
            One tensor per ``out_indices`` entry, shaped by ``out_type``.
        """
        B = x.shape[0]
        x, patch_resolution = self.patch_embed(x)
        # PatchEmbed returns a transposed view of the convolution output
        # (token stride 1, channel stride L). Every later elementwise op would
        # keep that layout, so each residual add mixes it with the linears'
        # row-major outputs and runs as a slow strided kernel, and each
        # LayerNorm copies its input first. One copy here keeps the whole
        # residual stream row-major (at sapiens_0.3b, 1024x768, batch 8, bf16
        # on an H200: ~16 of 62 ms were such strided adds).
        x = x.contiguous()
        if self.cls_token is not None:
            x = torch.cat((self.cls_token.expand(B, -1, -1), x), dim=1)
        x = x + resize_pos_embed(
            self.pos_embed,
            self.patch_resolution,
            patch_resolution,
            mode=self.interpolate_mode,
            num_extra_tokens=self.num_extra_tokens)
        x = self.drop_after_pos(x)
        x = self.pre_norm(x)

        outs = []
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            if self.with_cp and self.training and x.requires_grad:
                x = cp.checkpoint(layer, x, use_reentrant=False)
            else:
                x = layer(x)
            if i == last and self.final_norm:
                x = self.ln1(x)
            if i in self.out_indices:
                outs.append(self._format_output(x, patch_resolution))
        return tuple(outs)
