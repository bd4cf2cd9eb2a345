"""Generic body-part segmentation dataset: an image folder + a mask folder.

Also holds the mapping of the original 34 Goliath classes to the 28-class
vocabulary (:func:`goliath_34_to_28_label_map`).
"""
import copy
import os.path as osp
from typing import Dict, List, Optional, Sequence, Union

from mmengine import fileio
from mmseg.datasets import BaseSegDataset
from mmseg.registry import DATASETS

from .metainfo import (BodyPartVocab, body_part_label_map,
                       load_body_part_classes)

__all__ = [
    'BodyPartSegDataset', 'goliath_34_to_28_label_map', 'pick_data_prefix'
]

Vocab = BodyPartVocab


def goliath_34_to_28_label_map() -> Dict[int, int]:
    """Map each of the 34 original Goliath class ids to the 28-class ids.

    The six classes dropped by Sapiens (Chair, Eyeglass_Frame,
    Eyeglass_Lenses, Headset, Lower_Spandex, Visible_Badge) map to the
    ignore index 255; the others keep their name and get their 28-class id.

    Returns:
        ``{old_id: new_id}`` for all 34 ids.
    """
    return dict(body_part_label_map('original_34', 'goliath_28'))


_LABEL_MAPS = {
    'goliath_34_to_28': goliath_34_to_28_label_map,
    # Sapiens2 (dome_29): from the 34 original classes or from v1 28-class
    # masks; see sapiens_mm.datasets.metainfo.body_part_label_map
    'goliath_34_to_29': lambda: dict(body_part_label_map('original_34')),
    'goliath_28_to_29': lambda: dict(body_part_label_map('goliath_28')),
}


def pick_data_prefix(dataset: str, data_root: Optional[str],
                     layouts: Sequence[dict], lazy_init: bool) -> dict:
    """The first of ``layouts`` whose image folder exists under
    ``data_root``.

    Args:
        dataset: Dataset name for the error message.
        data_root: Dataset root folder.
        layouts: Candidate ``data_prefix`` dicts, preferred first.
        lazy_init: Return the first layout instead of raising when none
            exists (the data is not read yet).

    Raises:
        FileNotFoundError: No layout matches and ``lazy_init`` is False.
    """
    for layout in layouts:
        if osp.isdir(osp.join(data_root or '', layout['img_path'])):
            return dict(layout)
    if lazy_init:
        return dict(layouts[0])
    tried = '; '.join(
        f"{lay['img_path']} + {lay['seg_map_path']}" for lay in layouts)
    raise FileNotFoundError(
        f'{dataset}: no known folder layout under data_root={data_root!r} '
        f'(tried {tried}). Point data_root at the extracted dataset or pass '
        'data_prefix=dict(img_path=..., seg_map_path=...).')


@DATASETS.register_module()
class BodyPartSegDataset(BaseSegDataset):
    """Images and body-part masks in two folders, matched by file stem.

    Layout (the synthetic generator's ``<split>/images`` + ``<split>/masks``
    is this layout with ``data_prefix=dict(img_path='train/images',
    seg_map_path='train/masks')``)::

        data_root/
          images/ person_001.jpg, sub/person_002.png, ...
          masks/  person_001.png, sub/person_002.png, ...

    A mask is a single-channel PNG of class ids (0 = background, 255 =
    ignore) in the vocabulary ``vocab``; ``images/a/b.jpg`` pairs with
    ``masks/a/b.png``. Every image must have a mask, or loading fails with the
    list of images that have none.

    Args:
        vocab: Class vocabulary: ``'goliath_28'`` (27 parts + background),
            ``'lip_cihp_20'`` or Sapiens2's ``'dome_29'``. Sets ``classes``
            and ``palette``.
        label_map: Mapping applied to mask ids when they are loaded:
            ``'goliath_34_to_28'`` (or, for dome_29, ``'goliath_34_to_29'``)
            for masks in the original 34-class Goliath ids,
            ``'goliath_28_to_29'`` for v1 28-class masks used with dome_29,
            or an explicit ``{old_id: new_id}`` dict. Defaults to None
            (masks already use ``vocab`` ids).
        img_suffixes: Image file suffixes to collect.
            Defaults to ('.jpg', '.jpeg', '.png').
        seg_map_suffix: Mask file suffix. Defaults to '.png'.
        data_prefix: ``img_path`` and ``seg_map_path`` folders, relative to
            ``data_root``. Without ``seg_map_path`` only images are
            loaded (inference).
            Defaults to ``dict(img_path='images', seg_map_path='masks')``.
        ann_file: Optional text file with one image stem (path relative to
            the image folder, no suffix) per line, to use a subset.
        **kwargs: Other ``BaseSegDataset`` options (``data_root``,
            ``pipeline``, ``test_mode``, ``metainfo``...).
    """
    METAINFO: dict = dict()

    def __init__(self,
                 vocab: Vocab = 'goliath_28',
                 label_map: Optional[Union[str, Dict[int, int]]] = None,
                 img_suffixes: Sequence[str] = ('.jpg', '.jpeg', '.png'),
                 seg_map_suffix: str = '.png',
                 data_prefix: Optional[dict] = None,
                 ann_file: str = '',
                 metainfo: Optional[dict] = None,
                 **kwargs) -> None:
        classes = load_body_part_classes(vocab)
        meta = dict(classes=tuple(classes['classes']),
                    palette=[list(c) for c in classes['palette']])
        meta.update(copy.deepcopy(metainfo or {}))
        if isinstance(label_map, str):
            if label_map not in _LABEL_MAPS:
                raise ValueError(f'Unknown label_map {label_map!r}; use one '
                                 f'of {sorted(_LABEL_MAPS)} or a dict.')
            label_map = _LABEL_MAPS[label_map]()
        self._mask_label_map = dict(label_map) if label_map else None
        self.img_suffixes = tuple(s.lower() for s in img_suffixes)
        if data_prefix is None:
            data_prefix = dict(img_path='images', seg_map_path='masks')
        super().__init__(
            ann_file=ann_file,
            img_suffix=self.img_suffixes[0],
            seg_map_suffix=seg_map_suffix,
            metainfo=meta,
            data_prefix=data_prefix,
            **kwargs)
        if self._mask_label_map is not None:
            self._metainfo['label_map'] = self._mask_label_map

    def _image_stems(self, img_dir: str) -> List[str]:
        """Relative image paths under ``img_dir`` (or from ``ann_file``)."""
        if self.ann_file:
            stems = [
                line.strip() for line in fileio.list_from_file(
                    self.ann_file, backend_args=self.backend_args)
                if line.strip()
            ]
            found = []
            for stem in stems:
                for suffix in self.img_suffixes:
                    if fileio.exists(
                            osp.join(img_dir, stem + suffix),
                            backend_args=self.backend_args):
                        found.append(stem + suffix)
                        break
                else:
                    raise FileNotFoundError(
                        f'{self.ann_file} lists {stem!r} but no image '
                        f'{stem}{{{",".join(self.img_suffixes)}}} exists in '
                        f'{img_dir}.')
            return found
        return sorted(
            f for f in fileio.list_dir_or_file(
                img_dir, list_dir=False, recursive=True,
                backend_args=self.backend_args)
            if osp.splitext(f)[1].lower() in self.img_suffixes)

    def load_data_list(self) -> List[dict]:
        """Collect ``(image, mask)`` pairs matched by relative stem."""
        img_dir = self.data_prefix.get('img_path')
        ann_dir = self.data_prefix.get('seg_map_path')
        if not img_dir or not fileio.isdir(img_dir,
                                           backend_args=self.backend_args):
            raise FileNotFoundError(
                f'{type(self).__name__}: image folder {img_dir!r} does not '
                'exist. Set data_root and data_prefix.img_path to the folder '
                'that holds the images.')
        images = self._image_stems(img_dir)
        if not images:
            raise FileNotFoundError(
                f'{type(self).__name__}: no {"/".join(self.img_suffixes)} '
                f'image in {img_dir}.')
        data_list, missing = [], []
        for rel in images:
            info = dict(img_path=osp.join(img_dir, rel))
            if ann_dir is not None:
                mask = osp.join(ann_dir,
                                osp.splitext(rel)[0] + self.seg_map_suffix)
                if not fileio.exists(mask, backend_args=self.backend_args):
                    missing.append(mask)
                info['seg_map_path'] = mask
            info['label_map'] = self._mask_label_map
            info['reduce_zero_label'] = self.reduce_zero_label
            info['seg_fields'] = []
            data_list.append(info)
        if missing:
            raise FileNotFoundError(
                f'{type(self).__name__}: {len(missing)} of {len(images)} '
                f'images in {img_dir} have no mask, e.g. {missing[:3]}. Each '
                f'image needs a mask <stem>{self.seg_map_suffix} at the same '
                f'relative path under {ann_dir}.')
        return data_list
