"""Sapiens2's bf16 RoPE and RMSNorm on their fast inference routes give
the bits of the routes autograd and export take.

The bf16 RoPE's own bit-exactness against native bf16 ops is checked in
tests/models/test_backbone.py (it runs the inference route).
"""
import warnings

import pytest
import torch

from sapiens_mm.models.layers import RMSNorm, RopePositionEmbedding, apply_rope


@pytest.mark.parametrize('rope_dtype', ['bf16', 'fp32'])
@pytest.mark.parametrize('x_dtype', [torch.float32, torch.bfloat16])
def test_rope_inference_route_has_the_bits_of_the_autograd_route(
        rope_dtype, x_dtype):
    rope = RopePositionEmbedding(64, rope_dtype=rope_dtype)
    sin, cos = rope(6, 4)
    gen = torch.Generator().manual_seed(0)
    # (B, heads, tokens, 64) as the attention's transposed views
    q = (torch.randn(2, 33, 4, 64, generator=gen) * 3).to(x_dtype)
    q = q.transpose(1, 2)
    k = q[:, :2].clone()  # 2 K/V heads
    with torch.no_grad():
        fast_q, fast_k = apply_rope(q, k, (sin, cos))
    qg = q.detach().clone().requires_grad_(True)
    slow_q, slow_k = apply_rope(qg, k, (sin, cos))
    assert slow_q.grad_fn is not None  # the differentiable route
    assert fast_q.dtype == slow_q.dtype == x_dtype
    assert torch.equal(fast_q, slow_q.detach())
    assert torch.equal(fast_k, slow_k)
    slow_q.sum().backward()
    assert qg.grad is not None and torch.isfinite(qg.grad).all()


@pytest.mark.parametrize('x_dtype', [torch.float32, torch.bfloat16])
def test_rope_kernel_has_the_bits_of_native_bf16_ops(x_dtype, monkeypatch):
    """The C kernel (CPUs with AVX512_BF16) against the native-op route it
    replaces, on the attention's transposed views and on contiguous
    tensors, with values large enough that most products round."""
    from sapiens_mm.models.layers import rope_position_embedding as module
    from sapiens_mm.utils import cpu_kernels
    if cpu_kernels.cpu_kernel('sapiens_rope_bf16') is None:
        pytest.skip('needs a CPU with AVX512_BF16 and a C compiler')
    sin, cos = RopePositionEmbedding(64)(5, 7)
    gen = torch.Generator().manual_seed(1)
    q = (torch.randn(2, 44, 3, 64, generator=gen) * 50).to(x_dtype)
    q = q.transpose(1, 2)  # (B, heads, 9 + 35 tokens, 64), a view
    k = (torch.randn(2, 1, 44, 64, generator=gen) * 50).to(x_dtype)
    with torch.no_grad():
        assert cpu_kernels.rope_bf16(q, sin, cos, 9) is not None  # it runs
        fast_q, fast_k = apply_rope(q, k, (sin, cos))
        monkeypatch.setattr(module, 'rope_bf16', lambda *a: None)
        ref_q, ref_k = apply_rope(q, k, (sin, cos))
    assert fast_q.dtype == x_dtype and fast_q.stride() == q.stride()
    assert torch.equal(fast_q, ref_q) and torch.equal(fast_k, ref_k)
    assert not torch.equal(fast_q, q.to(torch.bfloat16).to(x_dtype))


def test_rope_rejects_tables_longer_than_the_sequence():
    sin, cos = RopePositionEmbedding(64)(4, 4)
    x = torch.randn(1, 1, 10, 64)
    with pytest.raises(ValueError, match='cover 16 tokens'):
        apply_rope(x, x, (sin, cos))


def test_rms_norm_under_autocast_same_bits_without_the_mixed_dtype_path():
    """bf16 activations with a float32 weight (the q / k norms under
    autocast): PyTorch's nn.RMSNorm warns about the dtype mismatch and takes
    its mixed route; this norm gives the same bits without it."""
    torch.manual_seed(0)
    ours = RMSNorm(64, eps=1e-6)
    with torch.no_grad():
        ours.weight.uniform_(0.5, 1.5)
    stock = torch.nn.RMSNorm(64, eps=1e-6)
    stock.load_state_dict(ours.state_dict())
    x = torch.randn(2, 4, 50, 64).bfloat16()
    with torch.inference_mode(), torch.autocast('cpu', torch.bfloat16):
        with warnings.catch_warnings(record=True) as theirs_warned:
            warnings.simplefilter('always')
            want = stock(x)
        with warnings.catch_warnings(record=True) as ours_warned:
            warnings.simplefilter('always')
            got = ours(x)
    assert any('ismatch' in str(w.message) for w in theirs_warned)
    assert not ours_warned
    assert got.dtype == want.dtype == torch.bfloat16
    assert torch.equal(got, want)
    # same dtypes: PyTorch's own kernel, unchanged
    y = torch.randn(3, 64)
    assert torch.equal(ours(y), stock(y))
