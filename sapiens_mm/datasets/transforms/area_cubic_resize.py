"""Resize with the interpolation Sapiens2's seg inference picks."""
import mmcv
from mmseg.datasets.transforms import Resize
from mmseg.registry import TRANSFORMS

__all__ = ['AreaCubicResize']


@TRANSFORMS.register_module()
class AreaCubicResize(Resize):
    """mmseg ``Resize`` whose image interpolation depends on the direction.

    The official Sapiens2 segmentation inference resizes to 768x1024
    ignoring the aspect ratio with ``cv2.INTER_AREA`` when the new width is
    smaller than the old one and ``cv2.INTER_CUBIC`` otherwise. Everything
    else (``scale``, ``keep_ratio``, label maps resized with nearest) is
    upstream ``Resize``; the ``interpolation`` argument is not accepted.

    Args:
        **kwargs: ``Resize`` arguments (``scale`` (w, h), ``keep_ratio``...).
    """

    def __init__(self, **kwargs) -> None:
        if 'interpolation' in kwargs:
            raise TypeError('AreaCubicResize picks its interpolation per '
                            "image ('area' when shrinking the width, else "
                            "'bicubic'); remove `interpolation`.")
        super().__init__(**kwargs)

    def _resize_img(self, results: dict) -> None:
        old_h, old_w = results['img'].shape[:2]
        new_w = results['scale'][0]
        if self.keep_ratio:
            new_w = mmcv.rescale_size((old_w, old_h), results['scale'])[0]
        self.interpolation = 'area' if new_w < old_w else 'bicubic'
        super()._resize_img(results)
