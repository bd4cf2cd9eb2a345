"""Folder dataset for human matting."""
from typing import Sequence, Union

from mmseg.registry import DATASETS

from .dense_folder_dataset import DenseFolderDataset

__all__ = ['MattingFolderDataset']


@DATASETS.register_module()
class MattingFolderDataset(DenseFolderDataset):
    """Images and alpha mattes (optionally foregrounds and backgrounds)
    matched by file stem.

    The layout of portrait matting sets such as P3M-10k
    (``blurred_image/`` + ``mask/``) and AM-2k (``original/`` + ``mask/``),
    and the one ``sapiens_mm.datasets.synthetic.write_dataset`` writes::

        data_root/
            images/<stem>.jpg|png      RGB image
            alphas/<stem>.png          alpha matte, 8- or 16-bit grey
            fgs/<stem>.png|jpg         optional: foreground RGB
            bgs/<stem>.png|jpg         optional: background RGB

    ``data_prefix`` names the folders (``img_path`` and ``alpha_path``
    required; ``fg_path`` / ``bg_path`` optional), e.g. for P3M-10k
    ``dict(img_path='train/blurred_image', alpha_path='train/mask')``.
    Every image needs a file of the same stem in each named folder (any of
    ``img_suffix``). Samples are ``dict(img_path, alpha_path[, fg_path,
    bg_path], seg_fields=[])``; ``LoadMattingAnnotations`` reads them.

    Args:
        data_prefix: Defaults to ``dict(img_path='images',
            alpha_path='alphas')``.
        img_suffix: Suffixes of images and of alpha / fg / bg files
            (case-insensitive). Defaults to ``('.png', '.jpg', '.jpeg')``.
        **kwargs: Other :class:`DenseFolderDataset` arguments.
    """
    REQUIRED_TARGETS = ('alpha_path', )
    TARGET_KEYS = ('alpha_path', 'fg_path', 'bg_path')
    IMAGE_TARGETS = ('alpha_path', 'fg_path', 'bg_path')

    def __init__(self,
                 data_prefix: dict = dict(img_path='images',
                                          alpha_path='alphas'),
                 img_suffix: Union[str, Sequence[str]] = ('.png', '.jpg',
                                                          '.jpeg'),
                 **kwargs) -> None:
        if dict(data_prefix).get('mask_path'):
            raise ValueError('MattingFolderDataset reads alpha mattes: name '
                             'their folder alpha_path, not mask_path.')
        super().__init__(data_prefix=data_prefix, img_suffix=img_suffix,
                         **kwargs)
