"""Folder dataset for Sapiens2 albedo."""
from mmseg.registry import DATASETS

from .dense_folder_dataset import DenseFolderDataset

__all__ = ['AlbedoFolderDataset']


@DATASETS.register_module()
class AlbedoFolderDataset(DenseFolderDataset):
    """``images/``, ``masks/`` and ``albedos/*.npy`` matched by stem.

    :class:`DenseFolderDataset` with ``data_prefix`` defaulting to
    ``dict(img_path='images', mask_path='masks', albedo_path='albedos')``;
    ``albedo_path`` is required. An albedo file is an (H, W, 3) float RGB
    array in [0, 1], negative or non-finite where unknown.
    """
    REQUIRED_TARGETS = ('albedo_path', )

    def __init__(self,
                 data_prefix: dict = dict(
                     img_path='images', mask_path='masks',
                     albedo_path='albedos'),
                 **kwargs) -> None:
        super().__init__(data_prefix=data_prefix, **kwargs)
