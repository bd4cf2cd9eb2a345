from .upsample import init_upsample_stack, make_conv_stack, make_deconv_stack

__all__ = ['make_deconv_stack', 'make_conv_stack', 'init_upsample_stack']
