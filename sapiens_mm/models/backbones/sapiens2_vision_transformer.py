"""Sapiens2 Vision Transformer (facebookresearch/sapiens2, ICLR 2026).

Written from the Sapiens2 fact sheet (the official ``Sapiens2`` class at
commit 3098c14). Every state-dict key and shape equals the official one, so
the released ``.safetensors`` files load strictly, the bf16
``rope_embed.periods`` buffer included.

Differences from the v1 :class:`SapiensVisionTransformer`: RMSNorm without
bias, QK-norm, separate ``wq`` / ``wk`` / ``wv`` with half-width K/V in the
middle blocks (GQA), SwiGLU FFN, 2D RoPE (in bf16 by default, even in an fp32
model) instead of a learned ``pos_embed``, a CLS token plus 8 register
("storage") tokens, LayerScale on the attention branch only, and an optional
4K window tokenizer.
"""
from typing import Dict, List, Literal, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn
import torch.utils.checkpoint as cp
from mmcv.cnn.bricks.transformer import PatchEmbed
from mmengine.logging import print_log
from mmengine.model.weight_init import trunc_normal_
from mmpretrain.models.backbones.base_backbone import BaseBackbone
from mmpretrain.registry import MODELS

from ..layers import (PatchConv2d, RopePositionEmbedding,
                      Sapiens2TransformerBlock, Sapiens2WindowTokenizer)

__all__ = ['Sapiens2VisionTransformer']

ARCH_KEYS = ('embed_dims', 'num_layers', 'num_heads', 'feedforward_channels')
#: The overrides a ``layer_cfgs`` entry may hold.
LAYER_CFG_KEYS = ('num_kv_heads', 'qk_norm', 'layer_scale_init_value',
                  'drop_path_rate', 'feedforward_channels')


def _arch(embed_dims: int, num_layers: int, num_heads: int,
          feedforward_channels: int, num_tokenizer_layers: int,
          use_tokenizer: bool = False) -> dict:
    return dict(
        embed_dims=embed_dims,
        num_layers=num_layers,
        num_heads=num_heads,
        feedforward_channels=feedforward_channels,
        num_tokenizer_layers=num_tokenizer_layers,
        use_tokenizer=use_tokenizer)


@MODELS.register_module()
class Sapiens2VisionTransformer(BaseBackbone):
    """Sapiens2 ViT backbone.

    Forward: patch embedding (Conv2d k = s = 16, bias, no padding) -> tokens
    (row-major) -> optional 4K tokenizer (4x4 windows to one token) ->
    ``[cls_token, storage_tokens x 8, patches]`` (no absolute position
    embedding) -> blocks (RoPE on the patch tokens) -> final RMSNorm ``ln1``
    after the last block only.

    Args:
        arch: An ``arch_zoo`` name (``'sapiens2_0.1b'``, ``'sapiens2_0.4b'``,
            ``'sapiens2_0.8b'``, ``'sapiens2_1b'``, ``'sapiens2_5b'``,
            ``'sapiens2_1b_4k'`` (the 1b arch with the tokenizer),
            ``'sapiens2_tiny'`` (tests)), or a dict with ``embed_dims``,
            ``num_layers``, ``num_heads``, ``feedforward_channels`` and,
            for the tokenizer, ``num_tokenizer_layers``.
        img_size: (H, W) the model is meant for; it only sets
            ``patch_embed.init_out_size`` (RoPE works at any size). ``None``:
            (1024, 768), or (4096, 3072) with the tokenizer.
        patch_size: Patch size. Defaults to 16.
        out_indices: Blocks whose output is returned (negative counts from
            the end). Only the last block's output is final-normed, as in the
            official model. Defaults to -1.
        out_type: ``'raw'`` (B, 1 + 8 + N, C) with the CLS token first and
            the 8 register tokens next (the official default);
            ``'featmap'`` (B, C, H/16, W/16) without them, what the dense
            heads take; ``'cls_token'`` (B, C). Defaults to ``'raw'``.
        use_tokenizer: Run the 4K window tokenizer after the patch
            embedding (the encoder then sees H/64 x W/64 tokens). ``None``:
            the arch's setting (True only for ``'sapiens2_1b_4k'``).
        layer_cfgs: One dict of overrides per block (keys from
            ``num_kv_heads``, ``qk_norm``, ``layer_scale_init_value``,
            ``drop_path_rate``, ``feedforward_channels``), e.g.
            ``[{}, {'num_kv_heads': 8}]``; a single dict applies to every
            block. By default the official GQA rule applies: block i has
            ``num_heads // 2`` K/V heads unless ``i < 8`` or ``i >= L - 8``.
        rope_dtype: ``'bf16'`` (the official behaviour, also in fp32
            models) or ``'fp32'``. Defaults to ``'bf16'``.
        with_cp: Activation-checkpoint every block while training (compute
            for memory). Defaults to False.
        frozen_stages: With a value > 0, freeze the patch embedding, the
            CLS / register tokens, the tokenizer and the first
            ``frozen_stages`` blocks (and the final norm at ``num_layers``),
            as mmpretrain's ViT does. Defaults to -1 (nothing frozen).
        drop_path_rate: Stochastic-depth rate, rising linearly from 0 over
            the blocks. Defaults to 0 (the official setting).
        init_cfg: ``dict(type='Pretrained', checkpoint=PATH[, prefix=...])``
            loads strictly through :mod:`sapiens_mm.checkpoint` (an official
            pretrain ``.safetensors`` with flat keys, a task file with
            ``backbone.`` keys, or a ``.pth``); ``None``: the official
            random init (trunc-normal std 0.02 for linear / conv weights and
            the tokens, zero biases, unit norms, LayerScale 1e-4).

    Example:
        >>> m = Sapiens2VisionTransformer('sapiens2_tiny', out_type='featmap')
        >>> m(torch.randn(2, 3, 64, 48))[0].shape
        torch.Size([2, 64, 4, 3])
    """
    arch_zoo = {
        'sapiens2_0.1b': _arch(768, 12, 12, 3072, 2),
        'sapiens2_0.4b': _arch(1024, 24, 16, 4096, 2),
        'sapiens2_0.8b': _arch(1280, 32, 16, 5120, 3),
        'sapiens2_1b': _arch(1536, 40, 24, 6144, 4),
        'sapiens2_1b_4k': _arch(1536, 40, 24, 6144, 4, use_tokenizer=True),
        'sapiens2_5b': _arch(2432, 56, 32, 9728, 6),
        # For tests and quick runs; not a released size.
        'sapiens2_tiny': _arch(64, 2, 4, 128, 1),
    }
    #: CLS token + register tokens before the patch tokens.
    num_register_tokens = 8
    num_extra_tokens = 1 + num_register_tokens
    OUT_TYPES = ('raw', 'featmap', 'cls_token')

    def __init__(self,
                 arch: Union[str, dict] = 'sapiens2_0.4b',
                 img_size: Optional[Union[int, Tuple[int, int]]] = None,
                 patch_size: int = 16,
                 out_indices: Union[int, Sequence[int]] = -1,
                 out_type: Literal['raw', 'featmap', 'cls_token'] = 'raw',
                 use_tokenizer: Optional[bool] = None,
                 layer_cfgs: Optional[Union[dict, Sequence[dict]]] = None,
                 rope_dtype: Literal['bf16', 'fp32'] = 'bf16',
                 with_cp: bool = False,
                 frozen_stages: int = -1,
                 drop_path_rate: float = 0.,
                 init_cfg: Optional[dict] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        arch = self._resolve_arch(arch)
        use_tokenizer = self._resolve_tokenizer(arch, use_tokenizer)
        C, L = arch['embed_dims'], arch['num_layers']
        heads, ffn = arch['num_heads'], arch['feedforward_channels']
        if C % (4 * heads):
            raise ValueError(
                f'embed_dims ({C}) must be divisible by 4 * num_heads '
                f'({4 * heads}) for the 2D RoPE.')
        if out_type not in self.OUT_TYPES:
            raise ValueError(f'out_type must be one of {self.OUT_TYPES}, got '
                             f'{out_type!r}.')
        if img_size is None:
            img_size = (4096, 3072) if use_tokenizer else (1024, 768)
        elif isinstance(img_size, int):
            img_size = (img_size, img_size)
        self.arch = arch
        self.embed_dims = C
        self.num_layers = L
        self.num_heads = heads
        self.patch_size = patch_size
        self.out_type = out_type
        self.use_tokenizer = use_tokenizer
        self.rope_dtype = rope_dtype
        self.with_cp = with_cp
        self.frozen_stages = frozen_stages
        self.out_indices = self._resolve_out_indices(out_indices, L)

        # Parameters first: the official state dict starts with them.
        self.cls_token = nn.Parameter(torch.zeros(1, 1, C))
        self.storage_tokens = nn.Parameter(
            torch.zeros(1, self.num_register_tokens, C))
        self.patch_embed = PatchEmbed(
            in_channels=3, embed_dims=C, conv_type='Conv2d',
            kernel_size=patch_size, stride=patch_size, padding=0,
            input_size=tuple(img_size))
        # One GEMM where PyTorch's reduced-precision CPU conv is slow.
        self.patch_embed.projection.__class__ = PatchConv2d
        self.rope_embed = RopePositionEmbedding(C // heads,
                                                rope_dtype=rope_dtype)
        self.tokenizer = Sapiens2WindowTokenizer(
            C, heads, ffn, arch['num_tokenizer_layers']) \
            if use_tokenizer else None
        block_cfgs = self._block_cfgs(layer_cfgs, L, heads, drop_path_rate)
        self.blocks = nn.ModuleList(
            Sapiens2TransformerBlock(
                C, heads, **dict(dict(feedforward_channels=ffn), **cfg))
            for cfg in block_cfgs)
        self.ln1 = nn.RMSNorm(C, eps=1e-6)
        self._register_load_state_dict_pre_hook(self._fill_periods)
        self.reset_parameters()
        if self.frozen_stages > 0:
            self._freeze_stages()

    # ------------------------------------------------------------ options
    @classmethod
    def _resolve_arch(cls, arch: Union[str, dict]) -> dict:
        if isinstance(arch, str):
            if arch.lower() not in cls.arch_zoo:
                raise ValueError(
                    f'Unknown Sapiens2 arch {arch!r}; choose one of '
                    f'{sorted(cls.arch_zoo)} or pass a dict with '
                    f'{", ".join(ARCH_KEYS)} (and num_tokenizer_layers).')
            return dict(cls.arch_zoo[arch.lower()])
        if not isinstance(arch, dict):
            raise TypeError(f'arch must be a str or a dict, got '
                            f'{type(arch).__name__}.')
        missing = [k for k in ARCH_KEYS if k not in arch]
        unknown = sorted(
            set(arch) - set(ARCH_KEYS) -
            {'num_tokenizer_layers', 'use_tokenizer'})
        if missing or unknown:
            raise ValueError(
                f'arch dict: missing keys {missing}, unknown keys {unknown}; '
                f'it takes {", ".join(ARCH_KEYS)} and optionally '
                'num_tokenizer_layers.')
        return dict(dict(num_tokenizer_layers=None, use_tokenizer=False),
                    **arch)

    @staticmethod
    def _resolve_tokenizer(arch: dict, use_tokenizer: Optional[bool]) -> bool:
        if use_tokenizer is None:
            use_tokenizer = arch['use_tokenizer']
        elif arch['use_tokenizer'] and not use_tokenizer:
            raise ValueError(
                "arch 'sapiens2_1b_4k' is 'sapiens2_1b' with the 4K "
                "tokenizer; for no tokenizer use arch='sapiens2_1b'.")
        if use_tokenizer and not arch.get('num_tokenizer_layers'):
            raise ValueError('use_tokenizer=True needs num_tokenizer_layers '
                             '(>= 1) in the arch dict.')
        return bool(use_tokenizer)

    @staticmethod
    def _resolve_out_indices(out_indices: Union[int, Sequence[int]],
                             num_layers: int) -> List[int]:
        if isinstance(out_indices, int):
            out_indices = [out_indices]
        resolved = []
        for i in out_indices:
            j = num_layers + i if i < 0 else i
            if not 0 <= j < num_layers:
                raise ValueError(f'out_indices entry {i} is out of range for '
                                 f'{num_layers} blocks.')
            resolved.append(j)
        return resolved

    @staticmethod
    def default_kv_heads(num_layers: int, num_heads: int) -> List[int]:
        """The official GQA rule: K/V heads of every block.

        Block i keeps all ``num_heads`` if ``i < 8`` or ``i >= L - 8``, else
        has ``num_heads // 2``.
        """
        return [
            num_heads if i < 8 or i >= num_layers - 8 else num_heads // 2
            for i in range(num_layers)
        ]

    @classmethod
    def _block_cfgs(cls, layer_cfgs, num_layers: int, num_heads: int,
                    drop_path_rate: float) -> List[dict]:
        if layer_cfgs is None:
            layer_cfgs = [{}] * num_layers
        elif isinstance(layer_cfgs, dict):
            layer_cfgs = [layer_cfgs] * num_layers
        layer_cfgs = list(layer_cfgs)
        if len(layer_cfgs) != num_layers:
            raise ValueError(
                f'layer_cfgs has {len(layer_cfgs)} entries but the arch has '
                f'{num_layers} blocks: give one dict per block (or one dict '
                'for all).')
        kv = cls.default_kv_heads(num_layers, num_heads)
        dpr = [drop_path_rate * i / max(num_layers - 1, 1)
               for i in range(num_layers)]
        cfgs = []
        for i, over in enumerate(layer_cfgs):
            unknown = sorted(set(over) - set(LAYER_CFG_KEYS))
            if unknown:
                raise ValueError(f'layer_cfgs[{i}] has unknown keys {unknown};'
                                 f' allowed: {", ".join(LAYER_CFG_KEYS)}.')
            cfgs.append(dict(dict(num_kv_heads=kv[i], drop_path_rate=dpr[i]),
                             **over))
        return cfgs

    # --------------------------------------------------------------- init
    def reset_parameters(self) -> None:
        """The official random init (see the class docstring); a no-op on
        the meta device (no values to set; shape-only builds stay fast)."""
        if self.cls_token.is_meta:
            return
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Conv2d)):
                trunc_normal_(module.weight, std=.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.RMSNorm):
                nn.init.ones_(module.weight)
        for p in (self.cls_token, self.storage_tokens):
            trunc_normal_(p, std=.02)
        if self.tokenizer is not None:
            trunc_normal_(self.tokenizer.w_cls, std=.02)
            trunc_normal_(self.tokenizer.local_pos_embed, std=.02)
        for block in self.blocks:
            gamma = block.attn.gamma
            if not isinstance(gamma, nn.Identity):
                nn.init.constant_(gamma.weight,
                                  block.attn.layer_scale_init_value)
        self.rope_embed.reset_parameters()

    def init_weights(self) -> None:
        """Load ``init_cfg``'s Pretrained checkpoint strictly, or keep the
        random init of the constructor."""
        init_cfg = self.init_cfg
        if isinstance(init_cfg, dict) and init_cfg.get('type') == 'Pretrained':
            from sapiens_mm.checkpoint import load_backbone_checkpoint
            load_backbone_checkpoint(
                self, init_cfg['checkpoint'], prefix=init_cfg.get('prefix'))
            self._is_init = True
            return
        if init_cfg is not None:
            super().init_weights()

    def _fill_periods(self, state_dict: Dict[str, torch.Tensor], prefix: str,
                      *args, **kwargs) -> None:
        """A state dict without ``rope_embed.periods`` (a deterministic
        buffer; whether the released task files hold it is not verified)
        gets the default one, so that it still loads strictly."""
        own = prefix + 'rope_embed.periods'
        if own not in state_dict and (prefix + 'ln1.weight') in state_dict:
            state_dict[own] = self.rope_embed.default_periods(
                self.rope_embed.periods.device)
            print_log(f'{own} is not in the checkpoint: using the default '
                      'RoPE periods.', logger='current')

    # ------------------------------------------------------------ freezing
    def _freeze_stages(self) -> None:
        frozen: List[nn.Module] = [self.patch_embed]
        if self.tokenizer is not None:
            frozen.append(self.tokenizer)
        frozen += list(self.blocks[:self.frozen_stages])
        if self.frozen_stages >= self.num_layers:
            frozen.append(self.ln1)
        for module in frozen:
            module.eval()
            for param in module.parameters():
                param.requires_grad = False
        self.cls_token.requires_grad = False
        self.storage_tokens.requires_grad = False

    def train(self, mode: bool = True) -> 'Sapiens2VisionTransformer':
        """Set train / eval mode, keeping frozen stages frozen."""
        super().train(mode)
        if mode and self.frozen_stages > 0:
            self._freeze_stages()
        return self

    # ------------------------------------------------------------ forward
    def _format_output(self, x: torch.Tensor,
                       grid: Tuple[int, int]) -> torch.Tensor:
        if self.out_type == 'raw':
            return x
        if self.out_type == 'cls_token':
            return x[:, 0]
        B, _, C = x.shape
        return x[:, self.num_extra_tokens:].reshape(B, *grid,
                                                    C).permute(0, 3, 1, 2)

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, ...]:
        """Encode images.

        Args:
            x: (B, 3, H, W) normalised RGB images; H and W multiples of the
                patch size (of 4 patch sizes with the tokenizer).

        Returns:
            One tensor per ``out_indices`` entry: (B, 9 + N, C) for
            ``'raw'``, (B, C, H/16, W/16) for ``'featmap'`` (H/64, W/64 with
            the tokenizer), (B, C) for ``'cls_token'``.
        """
        step = self.patch_size * (self.tokenizer.window
                                  if self.tokenizer is not None else 1)
        if x.dim() != 4 or x.shape[-2] % step or x.shape[-1] % step:
            raise ValueError(
                f'Sapiens2VisionTransformer takes (B, 3, H, W) images with H '
                f'and W multiples of {step}, got {tuple(x.shape)}: resize or '
                'pad the input.')
        B = x.shape[0]
        x, grid = self.patch_embed(x)
        # The conv output is transposed (token stride 1); one copy keeps
        # the residual stream row-major.
        x = x.contiguous()
        if self.tokenizer is not None:
            x, grid = self.tokenizer(x, grid)
        x = torch.cat((self.cls_token.expand(B, -1, -1),
                       self.storage_tokens.expand(B, -1, -1), x), dim=1)
        rope = self.rope_embed(*grid)
        outs = []
        last = self.num_layers - 1
        for i, block in enumerate(self.blocks):
            if self.with_cp and self.training and torch.is_grad_enabled():
                x = cp.checkpoint(block, x, rope, use_reentrant=False)
            else:
                x = block(x, rope)
            if i == last:
                x = self.ln1(x)
            if i in self.out_indices:
                outs.append(self._format_output(x, grid))
        return tuple(outs)
