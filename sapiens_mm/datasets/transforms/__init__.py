__all__ = []
from .body_part_random_flip import BodyPartRandomFlip  # noqa: E402
from .random_background import RandomBackground  # noqa: E402
__all__ += ['BodyPartRandomFlip', 'RandomBackground']
from .dense_transforms import (DenseRandomFlip, DenseRandomRotate,  # noqa: E402
                               GenerateDepthTarget, GenerateNormalTarget,
                               LoadDenseAnnotations, PackDenseInputs)
__all__ += ['LoadDenseAnnotations', 'GenerateDepthTarget',
            'GenerateNormalTarget', 'DenseRandomFlip', 'DenseRandomRotate',
            'PackDenseInputs']
