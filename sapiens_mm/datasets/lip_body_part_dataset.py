"""LIP (Look Into Person) single-person human parsing, 20 classes."""
from typing import Literal, Optional

from mmseg.registry import DATASETS

from .body_part_seg_dataset import BodyPartSegDataset, pick_data_prefix

__all__ = ['LIPBodyPartDataset']


@DATASETS.register_module()
class LIPBodyPartDataset(BodyPartSegDataset):
    """LIP with the 20-class vocabulary (``lip_cihp_20``).

    ``data_root`` is the extracted LIP folder. The first of these layouts
    that exists is used (``{split}`` is ``train`` or ``val``; images are
    ``*.jpg``, masks ``*.png``)::

        images/{split}_images + segmentations/{split}_segmentations
        TrainVal_images/{split}_images
            + TrainVal_parsing_annotations/{split}_segmentations
        {split}_images + {split}_segmentations

    Masks hold class ids 0-19 (0 = background).

    Args:
        split: ``'train'`` or ``'val'``. Defaults to ``'train'``.
        data_prefix: Explicit ``img_path`` / ``seg_map_path``; skips the
            layout search.
        **kwargs: ``BodyPartSegDataset`` options.
    """

    LAYOUTS = (
        dict(img_path='images/{split}_images',
             seg_map_path='segmentations/{split}_segmentations'),
        dict(
            img_path='TrainVal_images/{split}_images',
            seg_map_path='TrainVal_parsing_annotations/'
            '{split}_segmentations'),
        dict(img_path='{split}_images',
             seg_map_path='{split}_segmentations'),
    )
    SPLITS = {'train': 'train', 'val': 'val'}

    def __init__(self,
                 split: Literal['train', 'val'] = 'train',
                 data_prefix: Optional[dict] = None,
                 vocab: str = 'lip_cihp_20',
                 **kwargs) -> None:
        if split not in self.SPLITS:
            raise ValueError(f'{type(self).__name__}: unknown split '
                             f'{split!r}; use one of {sorted(self.SPLITS)}.')
        if data_prefix is None:
            layouts = [{
                k: v.format(split=self.SPLITS[split])
                for k, v in layout.items()
            } for layout in self.LAYOUTS]
            data_prefix = pick_data_prefix(
                type(self).__name__, kwargs.get('data_root'), layouts,
                kwargs.get('lazy_init', False))
        self.split = split
        super().__init__(vocab=vocab, data_prefix=data_prefix, **kwargs)
