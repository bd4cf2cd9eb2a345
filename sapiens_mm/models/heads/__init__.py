from .upsample import init_upsample_stack, make_conv_stack, make_deconv_stack

__all__ = ['make_deconv_stack', 'make_conv_stack', 'init_upsample_stack']
from .sapiens_seg_head import SapiensSegHead  # noqa: E402
__all__ += ['SapiensSegHead']
from .sapiens_depth_head import SapiensDepthHead  # noqa: E402
from .sapiens_normal_head import SapiensNormalHead  # noqa: E402
__all__ += ['SapiensDepthHead', 'SapiensNormalHead']
from .sapiens_heatmap_head import SapiensHeatmapHead  # noqa: E402
__all__ += ['SapiensHeatmapHead']
