__all__ = []
from .depth_silog_loss import DepthSiLogLoss, depth_silog_loss  # noqa: E402
from .normal_cosine_loss import NormalCosineLoss  # noqa: E402
from .normal_l1_loss import NormalL1Loss  # noqa: E402
__all__ += ['DepthSiLogLoss', 'depth_silog_loss', 'NormalCosineLoss',
            'NormalL1Loss']
