"""Folder dataset for relative depth."""
from mmseg.registry import DATASETS

from .dense_folder_dataset import DenseFolderDataset

__all__ = ['DepthFolderDataset']


@DATASETS.register_module()
class DepthFolderDataset(DenseFolderDataset):
    """``images/``, ``masks/`` and ``depths/*.npy`` matched by stem.

    :class:`DenseFolderDataset` with ``data_prefix`` defaulting to
    ``dict(img_path='images', mask_path='masks', depth_path='depths')``;
    ``depth_path`` is required. Depth files are (H, W) float arrays in any
    unit (the training target is normalised per image).
    """
    REQUIRED_TARGETS = ('depth_path', )

    def __init__(self,
                 data_prefix: dict = dict(
                     img_path='images', mask_path='masks',
                     depth_path='depths'),
                 **kwargs) -> None:
        super().__init__(data_prefix=data_prefix, **kwargs)
