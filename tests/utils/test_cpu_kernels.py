"""The bf16 CPU RMSNorm kernel (sapiens_mm.utils.cpu_kernels) against
PyTorch's own ops, and the calls it leaves to PyTorch.

Tolerances: both RMSNorms compute in float32 and round once to bf16; only
the order of the float32 sum of squares differs, which moves the scale by
about 1e-7 relative, so an output can land on the other side of a bf16
rounding boundary: at most one bf16 step (2^-7 relative), in a handful of
elements per million (measured: 2.5e-6 to 5.4e-6 of the elements).
"""
import pytest
import torch
import torch.nn.functional as F

from sapiens_mm.models.layers import RMSNorm
from sapiens_mm.utils import cpu_kernels

BF16_STEP = 2.0**-7  # relative spacing of bf16 numbers (8 significant bits)

needs_kernels = pytest.mark.skipif(
    cpu_kernels.cpu_kernel('sapiens_rms_norm') is None,
    reason='needs a CPU with AVX512_BF16 and a C compiler')


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
