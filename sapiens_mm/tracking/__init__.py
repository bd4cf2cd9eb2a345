"""Video: people tracked across frames, smoothed keypoints, stabilised dense
maps."""
from .dense_stabilizer import (DepthStabilizer, NormalStabilizer,
                               PointmapScaleStabilizer)
from .one_euro_filter import OneEuroFilter
from .pose_tracker import (
    PoseTracker,
    bbox_iou,
    bboxes_from_keypoints,
    keypoint_oks,
)

__all__ = [
    'OneEuroFilter', 'PoseTracker', 'bbox_iou', 'keypoint_oks',
    'bboxes_from_keypoints', 'DepthStabilizer', 'NormalStabilizer',
    'PointmapScaleStabilizer'
]
