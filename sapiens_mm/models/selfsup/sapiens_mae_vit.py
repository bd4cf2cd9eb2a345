"""Sapiens encoder for MAE pretraining (mmpretrain's ``MAE`` backbone)."""
from typing import Optional, Tuple, Union

import torch
import torch.utils.checkpoint as cp
from mmpretrain.models.utils import build_2d_sincos_position_embedding
from mmpretrain.registry import MODELS

from ..backbones.sapiens_vision_transformer import SapiensVisionTransformer

__all__ = ['SapiensMAEViT']


@MODELS.register_module()
class SapiensMAEViT(SapiensVisionTransformer):
    """Sapiens ViT that encodes only a random subset of the patches (MAE).

    Same modules (so the same state-dict keys) as
    :class:`SapiensVisionTransformer` with a cls token: ``patch_embed``,
    ``cls_token``, ``pos_embed`` (1, 1 + N, C), ``layers.i``, ``ln1``. The
    ``pos_embed`` is a fixed 2D sin-cos embedding (not trained), as in
    mmpretrain's ``MAEViT`` and the official Sapiens pretraining. Drop-in
    backbone for mmpretrain's ``MAE`` with ``MAEPretrainDecoder`` /
    ``MAEPretrainHead``.

    Args:
        arch: A Sapiens arch name (``'sapiens_0.3b'`` ...,
            ``'sapiens_tiny'``) or an arch dict.
        img_size: Side of the square pretraining input. Defaults to 1024
            (a 64x64 patch grid, ``pos_embed`` (1, 4097, C)).
        patch_size: Patch size. Defaults to 16.
        mask_ratio: Fraction of the patches that are masked (hidden from the
            encoder). ``round(N * mask_ratio)`` patches are masked in every
            image. Defaults to 0.75.
        with_cp: Activation checkpointing of the encoder layers.
        **kwargs: Other :class:`SapiensVisionTransformer` arguments
            (``final_norm``, ``drop_path_rate``, ``patch_cfg``, ``init_cfg``
            ...). ``with_cls_token`` and ``out_type`` are fixed.
    """

    def __init__(self,
                 arch: Union[str, dict] = 'sapiens_0.3b',
                 img_size: int = 1024,
                 patch_size: int = 16,
                 mask_ratio: float = 0.75,
                 with_cp: bool = False,
                 **kwargs) -> None:
        for key in ('with_cls_token', 'out_type'):
            if key in kwargs:
                raise ValueError(
                    f'SapiensMAEViT fixes {key} (cls token on, raw tokens '
                    f'out); remove {key} from its config.')
        if isinstance(img_size, (tuple, list)):
            if len(img_size) != 2 or img_size[0] != img_size[1]:
                raise ValueError(
                    f'MAE pretraining needs a square img_size, got {img_size}'
                    ' (MAEPretrainHead patchifies square images only).')
            img_size = img_size[0]
        if not 0 <= mask_ratio < 1:
            raise ValueError(
                f'mask_ratio must be in [0, 1), got {mask_ratio}.')
        super().__init__(
            arch=arch,
            img_size=img_size,
            patch_size=patch_size,
            out_type='raw',
            with_cls_token=True,
            with_cp=with_cp,
            **kwargs)
        # Fixed sin-cos position embedding: not learnt during pretraining.
        self.pos_embed.requires_grad = False
        self.mask_ratio = mask_ratio
        self.num_patches = self.patch_resolution[0] * self.patch_resolution[1]

    def init_weights(self) -> None:
        """Sin-cos ``pos_embed``, xavier patch embedding, normal(0.02) cls
        token; or load the ``Pretrained`` checkpoint of ``init_cfg``."""
        super().init_weights()
        if isinstance(self.init_cfg, dict) and \
                self.init_cfg.get('type') == 'Pretrained':
            return
        pos_embed = build_2d_sincos_position_embedding(
            self.patch_resolution, self.embed_dims, cls_token=True)
        self.pos_embed.data.copy_(pos_embed.float())
        w = self.patch_embed.projection.weight.data
        torch.nn.init.xavier_uniform_(w.view([w.shape[0], -1]))
        torch.nn.init.normal_(self.cls_token, std=.02)

    def random_masking(
        self,
        x: torch.Tensor,
        mask_ratio: Optional[float] = None
    ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Keep a random subset of the tokens of every sample.

        Args:
            x: (B, N, C) patch tokens.
            mask_ratio: Fraction to mask; defaults to ``self.mask_ratio``.

        Returns:
            ``(x_visible (B, N - M, C), mask (B, N) with 1 = masked,
            ids_restore (B, N))`` where ``M = round(N * mask_ratio)``.
            ``ids_restore`` puts the tokens ``[visible..., masked...]`` back
            in patch order.
        """
        if mask_ratio is None:
            mask_ratio = self.mask_ratio
        B, N, C = x.shape
        num_masked = int(round(N * mask_ratio))
        len_keep = N - num_masked
        if len_keep < 1:
            raise ValueError(
                f'mask_ratio {mask_ratio} leaves no visible patch out of {N}.')
        noise = torch.rand(B, N, device=x.device)
        ids_shuffle = torch.argsort(noise, dim=1)  # small noise = keep
        ids_restore = torch.argsort(ids_shuffle, dim=1)
        ids_keep = ids_shuffle[:, :len_keep]
        x_visible = torch.gather(
            x, dim=1, index=ids_keep.unsqueeze(-1).expand(-1, -1, C))
        mask = torch.ones(B, N, device=x.device)
        mask[:, :len_keep] = 0
        mask = torch.gather(mask, dim=1, index=ids_restore)
        return x_visible, mask, ids_restore

    def forward(self,
                x: torch.Tensor,
                mask: Optional[bool] = True
                ) -> Union[Tuple[torch.Tensor, torch.Tensor, torch.Tensor],
                           Tuple[torch.Tensor, ...]]:
        """Encode the visible patches (``mask=True``) or the whole image.

        Args:
            x: (B, 3, S, S) normalised images, ``S = img_size``.
            mask: ``True`` (pretraining): mask patches at random. ``None`` or
                ``False``: plain ViT forward of all patches (any input size),
                as used by ``MAE.extract_feat``.

        Returns:
            With masking, ``(latent (B, 1 + N - M, C), mask (B, N),
            ids_restore (B, N))``, ``latent`` starting with the cls token.
            Without, the :class:`SapiensVisionTransformer` outputs
            (``'raw'`` tokens (B, 1 + N, C)).
        """
        if mask is None or mask is False:
            return super().forward(x)
        B = x.shape[0]
        x, patch_resolution = self.patch_embed(x)
        if tuple(patch_resolution) != tuple(self.patch_resolution):
            raise ValueError(
                f'MAE pretraining input gives a {tuple(patch_resolution)} '
                f'patch grid but the model is built for '
                f'{tuple(self.patch_resolution)}: crop / resize the images to '
                'img_size (RandomResizedCrop(scale=img_size)).')
        x = x + self.pos_embed[:, 1:, :]
        x, mask, ids_restore = self.random_masking(x, self.mask_ratio)
        cls_token = self.cls_token + self.pos_embed[:, :1, :]
        x = torch.cat((cls_token.expand(B, -1, -1), x), dim=1)
        for layer in self.layers:
            if self.with_cp and self.training and x.requires_grad:
                x = cp.checkpoint(layer, x, use_reentrant=False)
            else:
                x = layer(x)
        if self.final_norm:
            x = self.ln1(x)
        return x, mask, ids_restore
