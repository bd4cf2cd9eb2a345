"""Linear layers with their epilogue (activation, LayerScale, residual add)
fused into the GEMM (sapiens_mm.utils.cpu_linear.fused_linear), and the
encoder layers that use them, against float64 references and the stock
PyTorch / mmpretrain computations.

Tolerances: in float32 the fused route and PyTorch's ops both compute the
GEMM with float32 accumulation (in different blockings) and the epilogue in
float32, so both land within a few float32 ulps of the float64 value: the
fused error is held to 4x the error of PyTorch's ops plus 1e-6 of the
output's scale (measured: 0.5-1.5x). In bf16 the fused route rounds once,
PyTorch's ops once per op, so the fused route is held to PyTorch's error
(measured: 0.5-1x its mean error, at most its max error plus one bf16 step
of the largest output).
"""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from sapiens_mm.utils import cpu_linear
from sapiens_mm.utils.cpu_linear import fused_linear

needs_packing = pytest.mark.skipif(
    not cpu_linear.cpu_packed_linear_available(),
    reason="needs PyTorch's oneDNN packed linear ops")

BF16_STEP = 2.0**-7

# (activation, with a LayerScale, with a residual)
CASES = [(None, False, True), (None, True, True), (None, True, False),
         ('gelu', False, False), ('gelu', False, True),
         ('gelu_tanh', False, True), ('swiglu', False, False),
         ('swiglu', False, True)]


def _reference(x, weight, bias, activation, scale, residual):
    """The definition, in float64."""
    with torch.no_grad():
        y = F.linear(x.double(), weight.double(), bias.double())
        if activation == 'gelu':
            y = F.gelu(y)
        elif activation == 'gelu_tanh':
            y = F.gelu(y, approximate='tanh')
        elif activation == 'swiglu':
            half = y.shape[-1] // 2
            y = F.silu(y[..., :half]) * y[..., half:]
        if scale is not None:
            y = y * scale.double()
        return y if residual is None else residual.double() + y


def _inputs(dtype, activation, with_scale, with_residual, seed=0):
    gen = torch.Generator().manual_seed(seed)
    layer = nn.Linear(96, 160)
    with torch.no_grad():
        layer.weight.copy_(torch.randn(160, 96, generator=gen) / 96**0.5)
        layer.bias.copy_(torch.randn(160, generator=gen))
    layer.to(dtype)
    out = 80 if activation == 'swiglu' else 160
    x = torch.randn(2, 37, 96, generator=gen).to(dtype)
    scale = (torch.rand(out, generator=gen) + 0.5).to(dtype) \
        if with_scale else None
    residual = (torch.randn(2, 37, out, generator=gen) * 4).to(dtype) \
        if with_residual else None
    return layer, x, scale, residual


@needs_packing
@pytest.mark.parametrize('dtype', [torch.float32, torch.bfloat16])
@pytest.mark.parametrize('activation,with_scale,with_residual', CASES)
def test_fused_linear_against_float64(dtype, activation, with_scale,
                                      with_residual):
    layer, x, scale, residual = _inputs(dtype, activation, with_scale,
                                        with_residual)
    want = _reference(x, layer.weight, layer.bias, activation, scale,
                      residual)
    with torch.inference_mode():
        # a plain nn.Linear: PyTorch's ops of the definition, exactly
        plain = fused_linear(layer, x, activation, scale, residual)
        y = layer(x)
        if activation == 'swiglu':
            y = F.silu(y[..., :80]) * y[..., 80:]
        elif activation is not None:
            y = F.gelu(y, approximate='none' if activation == 'gelu' else
                       'tanh')
        y = y if scale is None else y * scale
        assert torch.equal(plain, y if residual is None else residual + y)
        assert cpu_linear.pack_cpu_linears(layer) == 1
        fused = fused_linear(layer, x, activation, scale, residual)
    key = layer._packed[0]  # the packed route ran, in the layout asked for
    assert key[0] == dtype and key[1] == (activation == 'swiglu')
    # a scale is folded into float32 weights only
    assert (key[-1] is None) == (scale is None or dtype == torch.bfloat16)
    assert fused.dtype == dtype and fused.shape == want.shape
    err_fused = (fused.double() - want).abs()
    err_plain = (plain.double() - want).abs()
    if dtype == torch.float32:
        bound = 4 * float(err_plain.max()) + 1e-6 * float(want.abs().max())
        assert float(err_fused.max()) <= bound
    else:
        assert float(err_fused.mean()) <= float(err_plain.mean())
        assert float(err_fused.max()) <= float(err_plain.max()) + \
            BF16_STEP * float(want.abs().max())


@needs_packing
def test_fused_linear_under_autocast_adds_the_float32_residual():
    """Autocast: the GEMM and its activation in bf16, the float32 residual
    added in float32 (as ``residual + bf16 output`` promotes)."""
    layer, x, scale, residual = _inputs(torch.float32, None, True, True)
    want = _reference(x, layer.weight, layer.bias, None, scale, residual)
    cpu_linear.pack_cpu_linears(layer)
    with torch.inference_mode(), torch.autocast('cpu', torch.bfloat16):
        got = fused_linear(layer, x, scale=scale, residual=residual)
        stock = residual + F.linear(x, layer.weight, layer.bias) * scale
    assert layer._packed[0][0] == torch.bfloat16
    assert layer._packed[0][-1] is None  # bf16: the scale is not folded
    assert got.dtype == torch.float32
    # both: a bf16 GEMM output, so one bf16 step of the branch's scale
    tol = 2 * BF16_STEP * float((want - residual.double()).abs().max())
    assert float((got.double() - want).abs().max()) <= tol
    assert float((stock.double() - want).abs().max()) <= tol


@needs_packing
def test_fused_linear_keeps_autograd_and_checks_its_arguments():
    layer, x, scale, residual = _inputs(torch.float32, None, True, True)
    cpu_linear.pack_cpu_linears(layer)
    layer.requires_grad_(False)
    residual.requires_grad_()
    scale.requires_grad_()
    out = fused_linear(layer, x, scale=scale, residual=residual)
    out.sum().backward()
    assert layer._packed is None  # autograd: PyTorch's ops
    assert torch.equal(residual.grad, torch.ones_like(residual))
    want = F.linear(x, layer.weight, layer.bias).sum(dim=(0, 1))
    torch.testing.assert_close(scale.grad, want)
    with pytest.raises(ValueError, match='Unknown linear activation'):
        fused_linear(layer, x, activation='relu')
    with pytest.raises(ValueError, match='scale applies'):
        fused_linear(nn.Linear(96, 160), x, activation='gelu',
                     scale=scale.detach())


@needs_packing
def test_sapiens_layers_fuse_for_inference_only():
    """The v1 encoder layer: eval output equals mmpretrain's forward (bit
    for bit unpacked, within float32 rounding packed); training runs
    mmpretrain's forward; a layer with LayerScale keeps mmpretrain's
    class."""
    from mmpretrain.models.backbones.vision_transformer import \
        TransformerEncoderLayer

    from sapiens_mm.models.backbones import SapiensVisionTransformer
    torch.manual_seed(0)
    model = SapiensVisionTransformer('sapiens_tiny', img_size=(64, 48),
                                     drop_path_rate=0.1).eval()
    layer = model.layers[0]
    assert type(layer).__name__ == '_FusedEncoderLayer'
    x = torch.randn(2, 12, 64)
    with torch.inference_mode():
        stock = TransformerEncoderLayer.forward(layer, x)
        assert torch.equal(layer(x), stock)
        cpu_linear.pack_cpu_linears(model)
        fused = layer(x)
    assert layer.ffn.layers[1]._packed is not None
    torch.testing.assert_close(fused, stock, rtol=1e-5, atol=1e-5)
    # training: stochastic depth acts, as in mmpretrain's forward
    layer.train()
    torch.manual_seed(1)
    a = layer(x)
    torch.manual_seed(1)
    assert torch.equal(a, TransformerEncoderLayer.forward(layer, x))
    scaled = SapiensVisionTransformer(
        'sapiens_tiny', img_size=(64, 48),
        layer_cfgs=dict(layer_scale_init_value=0.1))
    assert type(scaled.layers[0]) is TransformerEncoderLayer


@needs_packing
def test_sapiens2_block_fuses_for_inference_only():
    """The Sapiens2 block (LayerScale, SwiGLU, GQA): eval output equals the
    composed modules (bit for bit unpacked, within float32 rounding
    packed)."""
    from sapiens_mm.models.layers import Sapiens2TransformerBlock
    torch.manual_seed(0)
    block = Sapiens2TransformerBlock(64, 4, 96, num_kv_heads=2,
                                     layer_scale_init_value=0.5).eval()
    x = torch.randn(2, 10, 64)

    def composed(x):
        x = x + block.attn(block.ln1(x))
        return x + block.ffn(block.ln2(x))

    with torch.inference_mode():
        stock = composed(x)
        assert torch.equal(block(x), stock)
        cpu_linear.pack_cpu_linears(block)
        fused = block(x)
        assert block.ffn.w12._packed[0][1]  # SwiGLU's halves
        assert block.attn.proj._packed[0][-1] is not None  # LayerScale
        torch.testing.assert_close(fused, stock, rtol=1e-5, atol=1e-5)
