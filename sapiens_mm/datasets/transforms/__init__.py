__all__ = []
from .body_part_random_flip import BodyPartRandomFlip  # noqa: E402
from .random_background import RandomBackground  # noqa: E402
__all__ += ['BodyPartRandomFlip', 'RandomBackground']
from .dense_transforms import (DenseRandomFlip, DenseRandomRotate,  # noqa: E402
                               GenerateAlbedoTarget, GenerateDepthTarget,
                               GenerateNormalTarget, GeneratePointmapTarget,
                               LoadDenseAnnotations, PackDenseInputs,
                               fit_intrinsics)
__all__ += ['LoadDenseAnnotations', 'GenerateDepthTarget',
            'GenerateNormalTarget', 'GeneratePointmapTarget',
            'GenerateAlbedoTarget', 'DenseRandomFlip', 'DenseRandomRotate',
            'PackDenseInputs', 'fit_intrinsics']
from .resize_pad_image import ResizePadImage  # noqa: E402
from .area_cubic_resize import AreaCubicResize  # noqa: E402
__all__ += ['ResizePadImage', 'AreaCubicResize']
from .sapiens2_topdown_affine import Sapiens2TopdownAffine  # noqa: E402
__all__ += ['Sapiens2TopdownAffine']
from .random_gaussian_noise import RandomGaussianNoise  # noqa: E402
from .random_down_up_sample import RandomDownUpSample  # noqa: E402
__all__ += ['RandomGaussianNoise', 'RandomDownUpSample']
from .matting_transforms import (GenerateMattingTarget,  # noqa: E402
                                 LoadMattingAnnotations, MattingResize,
                                 read_alpha)
__all__ += ['LoadMattingAnnotations', 'MattingResize',
            'GenerateMattingTarget', 'read_alpha']
