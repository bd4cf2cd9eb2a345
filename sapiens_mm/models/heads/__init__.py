from .upsample import (RMSNorm2d, init_upsample_stack, make_conv_stack,
                       make_deconv_stack, make_pixel_shuffle_stack)

__all__ = ['make_deconv_stack', 'make_conv_stack', 'init_upsample_stack',
           'make_pixel_shuffle_stack', 'RMSNorm2d']
from .sapiens_seg_head import SapiensSegHead  # noqa: E402
__all__ += ['SapiensSegHead']
from .sapiens_depth_head import SapiensDepthHead  # noqa: E402
from .sapiens_normal_head import SapiensNormalHead  # noqa: E402
__all__ += ['SapiensDepthHead', 'SapiensNormalHead']
from .sapiens_heatmap_head import SapiensHeatmapHead  # noqa: E402
__all__ += ['SapiensHeatmapHead']
from .sapiens2_heatmap_head import Sapiens2HeatmapHead  # noqa: E402
from .sapiens2_dense_head import Sapiens2DenseHead  # noqa: E402
from .sapiens2_normal_head import Sapiens2NormalHead  # noqa: E402
from .sapiens2_albedo_head import Sapiens2AlbedoHead  # noqa: E402
from .sapiens2_pointmap_head import Sapiens2PointmapHead  # noqa: E402
from .sapiens2_matting_head import Sapiens2MattingHead  # noqa: E402
__all__ += ['Sapiens2HeatmapHead', 'Sapiens2DenseHead', 'Sapiens2NormalHead',
            'Sapiens2AlbedoHead', 'Sapiens2PointmapHead',
            'Sapiens2MattingHead']
