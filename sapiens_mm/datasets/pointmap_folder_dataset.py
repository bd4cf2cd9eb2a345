"""Folder dataset for Sapiens2 pointmaps."""
from mmseg.registry import DATASETS

from .dense_folder_dataset import DenseFolderDataset

__all__ = ['PointmapFolderDataset']


@DATASETS.register_module()
class PointmapFolderDataset(DenseFolderDataset):
    """``images/``, ``masks/`` and ``pointmaps/*.npy`` matched by stem.

    :class:`DenseFolderDataset` with ``data_prefix`` defaulting to
    ``dict(img_path='images', mask_path='masks', pointmap_path='pointmaps')``;
    ``pointmap_path`` is required. A pointmap file is an (H, W, 3) float
    array of camera-frame XYZ (OpenCV axes: X right, Y down, Z forward, in
    metres or any fixed unit) of the pixel's surface point, ``Z <= 0`` or
    non-finite where there is none. Depth maps with known intrinsics convert
    with :func:`sapiens_mm.utils.pointcloud.backproject`. The
    camera intrinsics need not be stored: ``GeneratePointmapTarget`` fits
    them to the pointmap after the geometric augmentations.
    """
    REQUIRED_TARGETS = ('pointmap_path', )

    def __init__(self,
                 data_prefix: dict = dict(
                     img_path='images', mask_path='masks',
                     pointmap_path='pointmaps'),
                 **kwargs) -> None:
        super().__init__(data_prefix=data_prefix, **kwargs)
