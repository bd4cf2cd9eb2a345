"""Folder dataset for dense human targets (depth, normals, pointmaps,
albedo)."""
import os.path as osp
from typing import List, Optional, Sequence, Tuple, Union

from mmengine import fileio
from mmengine.dataset import BaseDataset
from mmseg.registry import DATASETS

__all__ = ['DenseFolderDataset']

_TARGET_KEYS = ('depth_path', 'normal_path', 'pointmap_path',
                'albedo_path')


@DATASETS.register_module()
class DenseFolderDataset(BaseDataset):
    """Images with foreground masks and dense targets, matched by file stem.

    Layout (the public Sapiens "general" format, and the one written by
    ``sapiens_mm.datasets.synthetic.write_dataset`` for each split)::

        data_root/
            images/<stem>.png|.jpg       RGB image
            masks/<stem>.png             foreground mask: any value > 0
            depths/<stem>.npy            (H, W) float depth (any scale)
            normals/<stem>.npy           (H, W, 3) float normals in [-1, 1]
            pointmaps/<stem>.npy         (H, W, 3) float camera-frame XYZ
            albedos/<stem>.npy           (H, W, 3) float RGB albedo in [0, 1]

    Every image needs a file of the same stem (also in sub-folders: the
    path relative to ``images/`` is the stem) in each folder named by
    ``data_prefix``; a missing one is an error that lists it. Leave
    ``mask_path`` out of ``data_prefix`` to take the foreground from the
    target itself (positive depth / non-zero normal); ``mask_path=None``
    does the same.

    Each sample is ``dict(img_path, mask_path, <target>_path...,
    seg_fields=[])``; ``LoadDenseAnnotations`` reads them.

    Args:
        data_root: Root folder joined to every ``data_prefix`` entry.
        data_prefix: ``img_path`` (required), ``mask_path`` (optional) and at
            least one of ``depth_path``, ``normal_path``, ``pointmap_path``
            and ``albedo_path``.
        img_suffix: Image file suffixes (case-insensitive).
        mask_suffix: Mask file suffix. Defaults to ``'.png'``.
        target_suffix: Target file suffix. Defaults to ``'.npy'``.
        backend_args: mmengine file backend arguments.
        **kwargs: ``pipeline``, ``test_mode``, ``indices``... of
            :class:`mmengine.dataset.BaseDataset`.
    """
    REQUIRED_TARGETS: Tuple[str, ...] = ()
    #: The ``data_prefix`` target keys this dataset accepts.
    TARGET_KEYS: Tuple[str, ...] = _TARGET_KEYS
    #: Target keys whose files are images, found with any ``img_suffix``
    #: (the others have ``target_suffix``).
    IMAGE_TARGETS: Tuple[str, ...] = ()

    def __init__(self,
                 data_root: str = '',
                 data_prefix: dict = dict(
                     img_path='images', mask_path='masks',
                     depth_path='depths', normal_path='normals'),
                 img_suffix: Union[str, Sequence[str]] = ('.png', '.jpg',
                                                          '.jpeg'),
                 mask_suffix: str = '.png',
                 target_suffix: str = '.npy',
                 backend_args: Optional[dict] = None,
                 **kwargs) -> None:
        # a None / empty entry means "not used" (e.g. mask_path=None)
        data_prefix = {k: v for k, v in dict(data_prefix).items() if v}
        if not data_prefix.get('img_path'):
            raise ValueError('data_prefix needs `img_path`, the image folder '
                             '(e.g. "images").')
        unknown = set(data_prefix) - {'img_path', 'mask_path',
                                      *self.TARGET_KEYS}
        if unknown:
            raise ValueError(
                f'Unknown data_prefix keys {sorted(unknown)}; use img_path, '
                f'mask_path and target folders among '
                f'{list(self.TARGET_KEYS)}.')
        targets = [k for k in self.TARGET_KEYS if data_prefix.get(k)]
        if not targets:
            raise ValueError(f'data_prefix needs a target folder, one of '
                             f'{list(self.TARGET_KEYS)} (e.g. '
                             f'{self.TARGET_KEYS[0]}="...").')
        for key in self.REQUIRED_TARGETS:
            if not data_prefix.get(key):
                raise ValueError(f'{type(self).__name__} needs `{key}` in '
                                 'data_prefix.')
        if isinstance(img_suffix, str):
            img_suffix = (img_suffix, )
        self.img_suffix = tuple(s.lower() for s in img_suffix)
        self.mask_suffix = mask_suffix
        self.target_suffix = target_suffix
        self.backend_args = backend_args
        super().__init__(
            data_root=data_root, data_prefix=data_prefix, **kwargs)

    def load_data_list(self) -> List[dict]:
        """Match images to masks and targets by stem.

        Raises:
            FileNotFoundError: The image folder is missing or empty, or an
                image has no mask / target file.
            ValueError: Two images share a stem (e.g. ``a.png`` and
                ``a.jpg``).
        """
        img_dir = self.data_prefix['img_path']
        if not fileio.isdir(img_dir, backend_args=self.backend_args):
            raise FileNotFoundError(
                f'Image folder not found: {img_dir}. Set data_root / '
                'data_prefix.img_path to the folder of images (generate '
                'a synthetic set with sapiens_mm.datasets.synthetic.'
                'write_dataset).')
        images = sorted(
            f for f in fileio.list_dir_or_file(
                img_dir, list_dir=False, recursive=True,
                backend_args=self.backend_args)
            if osp.splitext(f)[1].lower() in self.img_suffix)
        if not images:
            raise FileNotFoundError(
                f'No image with suffix {self.img_suffix} in {img_dir}.')
        folders = {k: self.data_prefix[k] for k in
                   ('mask_path', *self.TARGET_KEYS)
                   if self.data_prefix.get(k)}
        data_list, missing, seen = [], [], {}
        for name in images:
            stem = osp.splitext(name)[0]
            if stem in seen:
                raise ValueError(
                    f'Images {seen[stem]} and {name} in {img_dir} share the '
                    'stem used to match masks and targets; rename one.')
            seen[stem] = name
            info = dict(img_path=osp.join(img_dir, name), seg_fields=[])
            for key, folder in folders.items():
                if key in self.IMAGE_TARGETS:
                    suffixes = self.img_suffix
                else:
                    suffixes = (self.mask_suffix if key == 'mask_path' else
                                self.target_suffix, )
                paths = [osp.join(folder, stem + s) for s in suffixes]
                path = next((p for p in paths if fileio.exists(
                    p, backend_args=self.backend_args)), None)
                if path is None:
                    missing.append(paths[0])
                info[key] = path or paths[0]
            data_list.append(info)
        if missing:
            shown = '\n  '.join(missing[:5])
            raise FileNotFoundError(
                f'{len(missing)} mask/target file(s) missing for the images '
                f'in {img_dir}, e.g.\n  {shown}\nEvery image needs a file '
                'with the same stem in each data_prefix folder; add them or '
                'remove the images.')
        return data_list
