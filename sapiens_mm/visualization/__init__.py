"""Drawing Sapiens predictions on images (OpenCV, BGR uint8): skeletons,
OpenPose-style maps, body-part colours, depth and normal colour maps with
their keys, the matting key, and captions."""
from .color import rgb_to_bgr
from .dense import (colorize_albedo, colorize_depth, colorize_normal,
                    draw_depth, draw_normal)
from .legend import add_caption, matting_key
from .openpose import SKELETON_STYLES, SkeletonStyle, draw_openpose
from .pose import draw_pose
from .seg import draw_seg

__all__ = [
    'draw_pose', 'draw_openpose', 'draw_seg', 'colorize_depth',
    'colorize_normal', 'colorize_albedo', 'draw_depth', 'draw_normal',
    'rgb_to_bgr', 'SKELETON_STYLES', 'SkeletonStyle', 'add_caption',
    'matting_key'
]
