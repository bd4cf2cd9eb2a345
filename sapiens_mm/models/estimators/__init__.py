__all__ = []
from .sapiens_dense_estimator import SapiensDenseEstimator  # noqa: E402
__all__ += ['SapiensDenseEstimator']
from .sapiens2_dense_estimator import (Sapiens2DenseEstimator,  # noqa: E402
                                       finish_prediction, prediction_fields)
__all__ += ['Sapiens2DenseEstimator', 'finish_prediction',
            'prediction_fields']
from .sapiens2_topdown_pose_estimator import \
    Sapiens2TopdownPoseEstimator  # noqa: E402

__all__ += ['Sapiens2TopdownPoseEstimator']
