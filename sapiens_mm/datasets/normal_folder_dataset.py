"""Folder dataset for surface normals."""
from mmseg.registry import DATASETS

from .dense_folder_dataset import DenseFolderDataset

__all__ = ['NormalFolderDataset']


@DATASETS.register_module()
class NormalFolderDataset(DenseFolderDataset):
    """``images/``, ``masks/`` and ``normals/*.npy`` matched by stem.

    :class:`DenseFolderDataset` with ``data_prefix`` defaulting to
    ``dict(img_path='images', mask_path='masks', normal_path='normals')``;
    ``normal_path`` is required. Normal files are (H, W, 3) float arrays of
    camera-frame XYZ normals (OpenCV axes: X right, Y down, Z forward);
    non-unit vectors are normalised when the target is made.
    """
    REQUIRED_TARGETS = ('normal_path', )

    def __init__(self,
                 data_prefix: dict = dict(
                     img_path='images', mask_path='masks',
                     normal_path='normals'),
                 **kwargs) -> None:
        super().__init__(data_prefix=data_prefix, **kwargs)
