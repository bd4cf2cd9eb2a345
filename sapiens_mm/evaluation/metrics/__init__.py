__all__ = []
from .depth_metric import SapiensDepthMetric  # noqa: E402
from .normal_metric import SapiensNormalMetric  # noqa: E402
__all__ += ['SapiensDepthMetric', 'SapiensNormalMetric']
from .checked_coco_metric import (  # noqa: E402
    CheckedCocoGroundTruthMixin, CheckedCocoMetric, CheckedCocoWholeBodyMetric)
__all__ += ['CheckedCocoGroundTruthMixin', 'CheckedCocoMetric',
            'CheckedCocoWholeBodyMetric']
from .goliath_metric import GoliathMetric, keypoint_oks_stats  # noqa: E402
__all__ += ['GoliathMetric', 'keypoint_oks_stats']
from .pointmap_metric import SapiensPointmapMetric  # noqa: E402
__all__ += ['SapiensPointmapMetric']
from .albedo_metric import SapiensAlbedoMetric  # noqa: E402
__all__ += ['SapiensAlbedoMetric']
from .matting_metric import (MattingMetric, connectivity_error,  # noqa: E402
                             gradient_error, mse_error, sad_error,
                             unknown_region)
__all__ += ['MattingMetric', 'sad_error', 'mse_error', 'gradient_error',
            'connectivity_error', 'unknown_region']
