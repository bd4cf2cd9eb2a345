"""CIHP (Crowd Instance-level Human Parsing), 20 classes."""
from mmseg.registry import DATASETS

from .lip_body_part_dataset import LIPBodyPartDataset

__all__ = ['CIHPBodyPartDataset']


@DATASETS.register_module()
class CIHPBodyPartDataset(LIPBodyPartDataset):
    """CIHP semantic part masks with the 20-class vocabulary.

    ``data_root`` is the extracted ``instance-level_human_parsing`` folder
    (or its parent). The first of these layouts that exists is used
    (``{S}`` is ``Training`` for ``split='train'``, ``Validation`` for
    ``split='val'``)::

        {S}/Images/*.jpg + {S}/Category_ids/*.png
        instance-level_human_parsing/{S}/Images + .../{S}/Category_ids

    ``Category_ids`` masks hold class ids 0-19, the same vocabulary as LIP.

    Args:
        split: ``'train'`` or ``'val'``. Defaults to ``'train'``.
        data_prefix: Explicit ``img_path`` / ``seg_map_path``; skips the
            layout search.
        **kwargs: ``BodyPartSegDataset`` options.
    """

    LAYOUTS = (
        dict(img_path='{split}/Images', seg_map_path='{split}/Category_ids'),
        dict(img_path='instance-level_human_parsing/{split}/Images',
             seg_map_path='instance-level_human_parsing/{split}/Category_ids'),
    )
    SPLITS = {'train': 'Training', 'val': 'Validation'}
