__all__ = []
from .depth_silog_loss import DepthSiLogLoss, depth_silog_loss  # noqa: E402
from .depth_ssi_loss import (DepthScaleShiftLoss,  # noqa: E402
                             depth_scale_shift_loss)
from .normal_cosine_loss import NormalCosineLoss  # noqa: E402
from .normal_l1_loss import NormalL1Loss  # noqa: E402
__all__ += ['DepthSiLogLoss', 'depth_silog_loss', 'DepthScaleShiftLoss',
            'depth_scale_shift_loss', 'NormalCosineLoss',
            'NormalL1Loss']
from .normal_grad_loss import NormalGradLoss  # noqa: E402
from .albedo_loss import AlbedoLoss  # noqa: E402
from .body_part_dice_loss import BodyPartDiceLoss  # noqa: E402
from .pointmap_loss import PointmapLoss, pointmap_normals  # noqa: E402
__all__ += ['NormalGradLoss', 'AlbedoLoss', 'BodyPartDiceLoss',
            'PointmapLoss', 'pointmap_normals']
from .matting_loss import (MattingLoss, laplacian_pyramid,  # noqa: E402
                           split_matting_target)
__all__ += ['MattingLoss', 'laplacian_pyramid', 'split_matting_target']
