"""The bf16 CPU RMSNorm kernel (sapiens_mm.utils.cpu_kernels) and the
packed linear layers (sapiens_mm.utils.cpu_linear) against PyTorch's own
ops, and the calls each leaves to PyTorch.

Tolerances: both RMSNorms compute in float32 and round once to bf16; only
the order of the float32 sum of squares differs, which moves the scale by
about 1e-7 relative, so an output can land on the other side of a bf16
rounding boundary: at most one bf16 step (2^-7 relative), in a handful of
elements per million (measured: 2.5e-6 to 5.4e-6 of the elements). The
packed linear runs the same oneDNN bf16 GEMM with float32 accumulation in
another blocking: the float32 sums differ by a few float32 ulps, so again
an output may differ by one bf16 step, rarely (measured: under 1 %).
"""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from sapiens_mm.models.layers import RMSNorm
from sapiens_mm.utils import cpu_kernels, cpu_linear

BF16_STEP = 2.0**-7  # relative spacing of bf16 numbers (8 significant bits)

needs_kernels = pytest.mark.skipif(
    cpu_kernels.cpu_kernel('sapiens_rms_norm') is None,
    reason='needs a CPU with AVX512_BF16 and a C compiler')
needs_packing = pytest.mark.skipif(
    not cpu_linear.cpu_packed_linear_available(),
    reason="needs PyTorch's oneDNN packed linear ops")


def _within_one_bf16_step(got, want, max_fraction):
    got, want = got.float(), want.float()
    rel = (got - want).abs() / want.abs().clamp_min(1e-30)
    assert float(rel.max()) <= BF16_STEP
    assert float((got != want).float().mean()) <= max_fraction


@needs_kernels
@pytest.mark.parametrize('shape', [(2, 77, 64), (1, 300, 1024), (5, 17),
                                   (3, 1, 100)])
@pytest.mark.parametrize('weight_dtype', [torch.bfloat16, torch.float32])
def test_rms_norm_kernel_against_pytorch(shape, weight_dtype):
    gen = torch.Generator().manual_seed(shape[-1])
    x = (torch.randn(shape, generator=gen) * 3).bfloat16()
    w = (torch.rand(shape[-1], generator=gen) + 0.5).to(weight_dtype)
    got = cpu_kernels.rms_norm(x, w, 1e-6)
    # PyTorch: bf16 in, bf16 weight -> float32 arithmetic, one rounding;
    # a float32 weight: the float32 norm of the upcast input.
    want = F.rms_norm(x.float(), (shape[-1], ), w.float(), 1e-6).bfloat16()
    if weight_dtype == torch.bfloat16:
        assert torch.equal(F.rms_norm(x, (shape[-1], ), w, 1e-6), want)
    assert got.dtype == torch.bfloat16 and got.shape == x.shape
    _within_one_bf16_step(got, want, max_fraction=1e-4)


@needs_kernels
def test_rms_norm_kernel_float32_against_float64():
    """float32: as close to a float64 norm as PyTorch's float32 norm, within
    a factor 2 (both round the scale and two products; measured 0.8-1.2x)."""
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(7, 300, 1024, generator=gen) * 3
    w = torch.rand(1024, generator=gen) + 0.5
    want = F.rms_norm(x.double(), (1024, ), w.double(), 1e-6)
    ours = cpu_kernels.rms_norm(x, w, 1e-6)
    theirs = F.rms_norm(x, (1024, ), w, 1e-6)
    assert ours.dtype == torch.float32
    err = float((ours.double() - want).abs().max())
    ref = float((theirs.double() - want).abs().max())
    assert 0 < err <= 2 * ref


@needs_kernels
def test_rms_norm_kernel_strided_rows_and_refusals():
    x = torch.randn(40, 2, 64).bfloat16()
    w = torch.rand(64).bfloat16() + 0.5
    rows = x[:, 1]  # every other row: strided rows, contiguous channels
    want = F.rms_norm(rows.float(), (64, ), w.float(), 1e-6).bfloat16()
    _within_one_bf16_step(cpu_kernels.rms_norm(rows, w, 1e-6), want,
                          1e-3)
    # Left to PyTorch: float32 input with a bf16 weight, autograd, a channel
    # stride.
    assert cpu_kernels.rms_norm(x.float(), w, 1e-6) is None
    assert cpu_kernels.rms_norm(x.transpose(1, 2), w[:2], 1e-6) is None
    wg = w.float().requires_grad_()
    assert cpu_kernels.rms_norm(x, wg, 1e-6) is None
    with torch.no_grad():
        assert cpu_kernels.rms_norm(x, wg, 1e-6) is not None


@needs_kernels
def test_rms_norm_module_takes_the_kernel_for_inference_only(monkeypatch):
    calls = []
    real = cpu_kernels.rms_norm

    def spy(*args):
        out = real(*args)
        if out is not None:  # the kernel ran
            calls.append(args[0].shape)
        return out

    import sapiens_mm.models.layers.rms_norm as rms_module
    monkeypatch.setattr(rms_module, 'rms_norm', spy)
    norm = RMSNorm(64, eps=1e-6).bfloat16()
    x = torch.randn(2, 10, 64).bfloat16()
    with torch.inference_mode():
        y = norm(x)
    assert calls == [x.shape]
    # training: autograd through PyTorch's norm
    calls.clear()
    y = norm(x.requires_grad_())
    y.float().sum().backward()
    assert calls == [] and norm.weight.grad is not None


@needs_packing
@pytest.mark.parametrize('autocast', [False, True])
def test_packed_linear_matches_f_linear(autocast):
    torch.manual_seed(0)
    layer = nn.Linear(96, 200)
    x = torch.randn(3, 70, 96)
    model = nn.Sequential(layer)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    assert cpu_linear.pack_cpu_linears(model) == 1
    assert type(layer) is cpu_linear.PackedCpuLinear
    assert model.state_dict().keys() == state.keys()
    if not autocast:
        model.bfloat16()
        x = x.bfloat16()
    with torch.inference_mode(), torch.autocast('cpu', torch.bfloat16,
                                                enabled=autocast):
        got = model(x)
        want = F.linear(x.bfloat16(), layer.weight.bfloat16(),
                        layer.bias.bfloat16())
    assert layer._packed is not None  # the packed route ran
    assert got.dtype == torch.bfloat16
    _within_one_bf16_step(got, want, max_fraction=0.02)
    # a copy of a packed model (the packed weight is an opaque tensor)
    twin = copy.deepcopy(model)
    assert twin[0]._packed is None
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
    assert layer._packed is not None and ours.dtype == torch.float32
    err = float((ours.double() - want).abs().max())
    assert err <= 4 * float((theirs.double() - want).abs().max()) + 1e-12
    # fp16 is left to nn.Linear
    layer.half()
    with torch.no_grad():
        layer(x.half())
    assert layer._packed is None


@needs_packing
def test_packed_linear_follows_weight_changes_and_training():
    torch.manual_seed(0)
    layer = nn.Linear(32, 48).bfloat16()
    cpu_linear.pack_cpu_linears(layer)
    x = torch.randn(5, 32).bfloat16()
    with torch.inference_mode():
        first = layer(x)
    new = {k: torch.randn_like(v) for k, v in layer.state_dict().items()}
    layer.load_state_dict(new)
    with torch.inference_mode():
        second = layer(x)
    want = F.linear(x, new['weight'], new['bias'])
    assert not torch.allclose(first, second)
    _within_one_bf16_step(second, want, max_fraction=0.05)
    # autograd: nn.Linear's own forward, gradients reach the weight
    layer.float()
    out = layer(x.float())
    out.sum().backward()
    assert layer.weight.grad is not None and out.dtype == torch.float32
    assert cpu_linear.unpack_cpu_linears(layer) == 1
    assert type(layer) is nn.Linear and not hasattr(layer, '_packed')


@needs_packing
def test_mmcv_linear_of_mmpretrain_ffn_is_packed_and_keeps_its_forward():
    """mmpretrain's FFN builds mmcv's Linear: it is packed too (the v1 FFN
    GEMMs are the biggest), and an empty batch still takes mmcv's
    forward."""
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
    assert all(type(m) is cpu_linear.PackedMMCVLinear and m._packed is not None
               for m in layers)
    # float32 sums in another order: within a few float32 ulps
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert empty.shape == (0, 9, 32)
    assert cpu_linear.unpack_cpu_linears(ffn) == 2
    assert all(type(m) is MMCVLinear for m in layers)
