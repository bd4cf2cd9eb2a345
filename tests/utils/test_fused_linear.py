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
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from sapiens_mm.utils import cpu_linear
from sapiens_mm.utils.cpu_features import packed_linear_supported
from sapiens_mm.utils.cpu_linear import PackedWeightError, fused_linear

needs_packing = pytest.mark.skipif(
    not packed_linear_supported(torch.float32),
    reason="needs PyTorch's oneDNN packed linear ops")
needs_bf16_packing = pytest.mark.skipif(
    not packed_linear_supported(torch.bfloat16),
    reason='bf16 packing needs AVX-512 or AVX-NE-CONVERT')

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
@pytest.mark.parametrize('dtype', [
    torch.float32,
    pytest.param(torch.bfloat16, marks=needs_bf16_packing)])
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
        if scale is not None and residual is not None:
            y = torch.addcmul(residual, y, scale)  # one rounding, one pass
        elif scale is not None:
            y = y * scale
        elif residual is not None:
            y = residual + y
        assert torch.equal(plain, y)
        assert cpu_linear.pack_cpu_linears(layer) == 1
        fused = fused_linear(layer, x, activation, scale, residual)
    # the packed route ran, in the layout asked for
    assert layer.packed_dtype == dtype
    assert layer._halves == (activation == 'swiglu')
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


@needs_bf16_packing
def test_fused_linear_under_autocast_adds_the_float32_residual():
    """Autocast: the GEMM and its activation in bf16, the float32 residual
    added in float32 (as ``residual + bf16 output`` promotes)."""
    layer, x, scale, residual = _inputs(torch.float32, None, True, True)
    want = _reference(x, layer.weight, layer.bias, None, scale, residual)
    with torch.inference_mode(), torch.autocast('cpu', torch.bfloat16):
        stock = residual + F.linear(x, layer.weight, layer.bias) * scale
    cpu_linear.pack_cpu_linears(layer, torch.bfloat16)
    with torch.inference_mode(), torch.autocast('cpu', torch.bfloat16):
        got = fused_linear(layer, x, scale=scale, residual=residual)
    assert layer.packed_dtype == torch.bfloat16
    assert got.dtype == torch.float32
    # both: a bf16 GEMM output, so one bf16 step of the branch's scale
    tol = 2 * BF16_STEP * float((want - residual.double()).abs().max())
    assert float((got.double() - want).abs().max()) <= tol
    assert float((stock.double() - want).abs().max()) <= tol


@needs_packing
def test_fused_linear_keeps_autograd_and_checks_its_arguments():
    """A plain layer: PyTorch's ops, with autograd. The inference form
    refuses autograd with a message instead of computing without it."""
    layer, x, scale, residual = _inputs(torch.float32, None, True, True)
    layer.requires_grad_(False)
    residual.requires_grad_()
    scale.requires_grad_()
    out = fused_linear(layer, x, scale=scale, residual=residual)
    out.sum().backward()
    assert torch.equal(residual.grad, torch.ones_like(residual))
    want = F.linear(x, layer.weight, layer.bias).sum(dim=(0, 1))
    torch.testing.assert_close(scale.grad, want)
    cpu_linear.pack_cpu_linears(layer)
    with pytest.raises(PackedWeightError, match='CPU inference only'):
        fused_linear(layer, x, scale=scale, residual=residual)
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
    assert isinstance(layer.ffn.layers[1], cpu_linear.PackedCpuLinear)
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
        assert block.ffn.w12._halves  # SwiGLU's halves
        torch.testing.assert_close(fused, stock, rtol=1e-5, atol=1e-5)


def _within_one_bf16_step(got, want, max_fraction):
    """The packed bf16 GEMM runs oneDNN with float32 accumulation in
    another blocking than ``F.linear``: the float32 sums differ by a few
    float32 ulps, so an output may differ by one bf16 step, rarely
    (measured: under 1 % of the outputs)."""
    got, want = got.float(), want.float()
    rel = (got - want).abs() / want.abs().clamp_min(1e-30)
    assert float(rel.max()) <= BF16_STEP
    assert float((got != want).float().mean()) <= max_fraction


@needs_bf16_packing
@pytest.mark.parametrize('autocast', [False, True])
def test_packed_linear_matches_f_linear(autocast):
    """bf16: a bf16 model packed in its dtype, or a float32 model packed in
    bf16 and run under autocast (the inferencers' case), computes
    ``F.linear`` in bf16; a copy of the packed model computes the same."""
    torch.manual_seed(0)
    layer = nn.Linear(96, 200)
    x = torch.randn(3, 70, 96)
    model = nn.Sequential(layer)
    with torch.no_grad():
        want = F.linear(x.bfloat16(), layer.weight.bfloat16(),
                        layer.bias.bfloat16())
    state = {k: v.clone() for k, v in model.state_dict().items()}
    if not autocast:
        model.bfloat16()
        x = x.bfloat16()
    assert cpu_linear.pack_cpu_linears(model, torch.bfloat16) == 1
    assert type(layer) is cpu_linear.PackedCpuLinear
    assert model.state_dict().keys() == state.keys()
    with torch.inference_mode(), torch.autocast('cpu', torch.bfloat16,
                                                enabled=autocast):
        got = model(x)
    assert got.dtype == torch.bfloat16
    _within_one_bf16_step(got, want, max_fraction=0.02)
    # a copy of a packed model (the packed weight is an opaque tensor)
    twin = copy.deepcopy(model)
    assert type(twin[0]) is cpu_linear.PackedCpuLinear
    with torch.inference_mode(), torch.autocast('cpu', torch.bfloat16,
                                                enabled=autocast):
        assert torch.equal(twin(x), got)


@needs_packing
def test_packed_linear_float32_against_float64():
    """float32: oneDNN's packed GEMM must be as close to a float64 product
    as F.linear (MKL) is, within a factor 4 (both are float32 sums of 300
    products in different orders; measured: 0.5-2x F.linear's error)."""
    torch.manual_seed(0)
    layer = nn.Linear(300, 130)
    x = torch.randn(2, 50, 300)
    with torch.no_grad():
        want = F.linear(x.double(), layer.weight.double(),
                        layer.bias.double())
        theirs = layer(x)
        cpu_linear.pack_cpu_linears(layer)
        ours = layer(x)
    assert type(layer) is cpu_linear.PackedCpuLinear
    assert ours.dtype == torch.float32
    err = float((ours.double() - want).abs().max())
    assert err <= 4 * float((theirs.double() - want).abs().max()) + 1e-12
    # a dtype oneDNN cannot pack here stays with nn.Linear
    layer.double()
    assert type(layer) is nn.Linear
    assert cpu_linear.pack_cpu_linears(layer) == 0


@needs_packing
def test_mmcv_linear_of_mmpretrain_ffn_is_packed_and_keeps_its_forward():
    """mmpretrain's FFN builds mmcv's Linear: it is packed too (the v1 FFN
    GEMMs are the biggest), and an empty batch still gives an empty
    output."""
    from mmcv.cnn.bricks.transformer import FFN
    from mmcv.cnn.bricks.wrappers import Linear as MMCVLinear
    torch.manual_seed(0)
    ffn = FFN(embed_dims=32, feedforward_channels=64).eval()
    layers = [m for m in ffn.modules() if isinstance(m, nn.Linear)]
    assert len(layers) == 2 and all(type(m) is MMCVLinear for m in layers)
    x = torch.randn(2, 9, 32)
    with torch.inference_mode():
        want = ffn(x)
        assert cpu_linear.pack_cpu_linears(ffn) == 2
        got = ffn(x)
        empty = ffn(x[:0])
    assert all(type(m) is cpu_linear.PackedMMCVLinear for m in layers)
    # float32 sums in another order: within a few float32 ulps
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert empty.shape == (0, 9, 32)
    assert cpu_linear.unpack_cpu_linears(ffn) == 2
    assert all(type(m) is MMCVLinear for m in layers)
