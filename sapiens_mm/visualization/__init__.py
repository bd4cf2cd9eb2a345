"""Drawing Sapiens predictions on images (OpenCV, BGR uint8): skeletons,
body-part colours, depth and normal colour maps."""
from .color import rgb_to_bgr
from .dense import colorize_depth, colorize_normal
from .pose import draw_pose
from .seg import draw_seg

__all__ = [
    'draw_pose', 'draw_seg', 'colorize_depth', 'colorize_normal',
    'rgb_to_bgr'
]
