import pytest
import torch
import torch.nn as nn

from sapiens_mm.models.heads import make_conv_stack, make_deconv_stack


def test_deconv_stack_layout_and_shape():
    stack = make_deconv_stack(64, (32, 32, 16), (4, 4, 4))
    keys = {k for k in stack.state_dict()}
    # Official key layout: learnable layers at 0, 3, 6; IN has no params.
    assert keys == {'0.weight', '3.weight', '6.weight'}
    assert isinstance(stack[1], nn.InstanceNorm2d) and not stack[1].affine
    assert isinstance(stack[2], nn.SiLU)
    assert stack[0].weight.shape == (64, 32, 4, 4)
    out = stack(torch.randn(2, 64, 8, 6))
    assert out.shape == (2, 16, 64, 48)


def test_conv_stack_layout_and_shape():
    stack = make_conv_stack(16, (8, 8), (1, 1))
    assert set(stack.state_dict()) == {'0.weight', '0.bias', '3.weight',
                                       '3.bias'}
    assert stack(torch.randn(1, 16, 5, 7)).shape == (1, 8, 5, 7)


def test_empty_stack_is_identity_and_bad_args_raise():
    assert isinstance(make_conv_stack(4, (), ()), nn.Identity)
    with pytest.raises(ValueError, match='kernel size'):
        make_deconv_stack(4, (8, 8), (4, ))
    with pytest.raises(ValueError, match='Unsupported deconv kernel'):
        make_deconv_stack(4, (8, ), (5, ))
