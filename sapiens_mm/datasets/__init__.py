from . import transforms  # noqa: F401
from .metainfo import load_body_part_classes, load_goliath_keypoints

__all__ = ['load_body_part_classes', 'load_goliath_keypoints']
