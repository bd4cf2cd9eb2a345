from .reconstruction import (
                             mae_reconstruct,
                             make_reconstruction_grid,
                             patchify,
                             prepare_images,
                             reconstruction_grid,
                             to_uint8_images,
                             unpatchify,
)
from .sapiens_mae_vit import SapiensMAEViT

__all__ = [
    'SapiensMAEViT', 'mae_reconstruct', 'make_reconstruction_grid',
    'patchify', 'prepare_images', 'reconstruction_grid', 'to_uint8_images',
    'unpatchify'
]
