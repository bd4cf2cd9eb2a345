"""The bf16 and float32 CPU attention kernels (sapiens_mm.utils.sdpa):
their results against a float64 reference and PyTorch's own kernel, the
calls they take and the ones they leave to PyTorch, and the Sapiens
attention modules that use them.

Tolerances. bf16: both kernels accumulate in float32 and round the softmax
probabilities and the output to bf16 (8 significant bits), so each is a few
bf16 roundings away from the exact result; the C kernel must be as close to
float64 as PyTorch's bf16 kernel is, within a factor 1.5 (measured on these
inputs: 0.9-1.0x PyTorch's error). float32: both are float32 sums; the C
kernel's exp is a polynomial with a relative error under 2e-7 (PyTorch's
about 1 float32 ulp, 6e-8), so it may be up to a few times further from
float64 than PyTorch's: a factor 3 (measured 1.2-2.4x), still ~1e-6.
"""
import pytest
import torch
import torch.nn.functional as F

from sapiens_mm.utils import sdpa

pytestmark = pytest.mark.skipif(
    not sdpa.cpu_attention_available(),
    reason='needs a CPU with AVX512_BF16 and a C compiler')


def _errors(q, k, v, gqa=False):
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(),
                                         enable_gqa=gqa)
    ours = sdpa.cpu_attention(q, k, v)
    theirs = F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)
    assert ours.dtype == q.dtype and ours.shape == theirs.shape
    return (float((ours.double() - ref).abs().max()),
            float((theirs.double() - ref).abs().max()))


FACTOR = {torch.bfloat16: 1.5, torch.float32: 3.0}


@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float32])
@pytest.mark.parametrize('batch, heads, kv_heads, tokens', [
    (1, 2, 2, 37),  # token count not a multiple of 8 or 32
    (2, 4, 2, 100),  # grouped-query attention, batch 2
    (1, 4, 1, 300),  # one K/V head for all
    (1, 1, 1, 1),
])
def test_against_float64_and_pytorch(batch, heads, kv_heads, tokens, dtype):
    gen = torch.Generator().manual_seed(tokens)
    q, k, v = (torch.randn(batch, h, tokens, 64, generator=gen).to(dtype)
               for h in (heads, kv_heads, kv_heads))
    ours, theirs = _errors(q, k, v, gqa=kv_heads != heads)
    assert ours <= FACTOR[dtype] * theirs + 1e-6


@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float32])
def test_strided_views_of_one_qkv_projection_and_large_scores(dtype):
    """mmpretrain's q / k / v are views of one (B, N, 3, heads, 64) tensor;
    scores of magnitude ~100 test the softmax's max subtraction."""
    gen = torch.Generator().manual_seed(0)
    qkv = (torch.randn(2, 77, 3, 3, 64, generator=gen) * 1.5).to(dtype)
    q, k, v = qkv.permute(2, 0, 3, 1, 4)
    assert not q.is_contiguous()
    ours, theirs = _errors(q, k, v)
    assert ours <= FACTOR[dtype] * theirs + 1e-6


def test_dispatch_takes_plain_inference_calls_only(monkeypatch):
    calls = []
    real = sdpa.cpu_attention

    def counted(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(sdpa, 'cpu_attention', counted)
    q, k, v = (torch.randn(1, 2, 20, 64).bfloat16() for _ in range(3))
    with torch.inference_mode():
        out = sdpa.scaled_dot_product_attention(q, k, v)
    assert calls == [1]
    torch.testing.assert_close(out, real(q, k, v), rtol=0, atol=0)
    # float32 too
    with torch.inference_mode():
        sdpa.scaled_dot_product_attention(q.float(), k.float(), v.float())
    assert calls == [1, 1]
    # left to PyTorch: a mask, dropout, causal, another scale, fp16, head
    # size 32, autograd, a pinned backend, GQA without enable_gqa
    mask = torch.zeros(20, 20, dtype=torch.bfloat16)
    sdpa.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    sdpa.scaled_dot_product_attention(q, k, v, is_causal=True)
    sdpa.scaled_dot_product_attention(q, k, v, scale=0.5)
    sdpa.scaled_dot_product_attention(q.half(), k.half(), v.half())
    sdpa.scaled_dot_product_attention(q[..., :32], k[..., :32], v[..., :32])
    qg = q.clone().requires_grad_(True)
    out = sdpa.scaled_dot_product_attention(qg, k, v)
    assert out.grad_fn is not None
    with sdpa.sdpa_backend('torch', 'cpu'):
        sdpa.scaled_dot_product_attention(q, k, v)
    # 2 query heads, 1 K/V head without enable_gqa: PyTorch broadcasts
    sdpa.scaled_dot_product_attention(q, k[:, :1], v[:, :1])
    assert calls == [1, 1]


def test_v1_and_sapiens2_attention_in_bf16_match_pytorch_kernel():
    """Whole backbones with head size 64 (the released models'), bf16
    autocast: features with the C kernel against the same model with
    PyTorch's kernel. Each layer adds a few bf16 roundings on both sides;
    the features of 2 layers (values ~1-4) agree to 0.1."""
    from sapiens_mm.analysis import build_backbone
    from sapiens_mm.models import Sapiens2VisionTransformer
    torch.manual_seed(0)
    v1 = build_backbone(dict(embed_dims=128, num_layers=2, num_heads=2,
                             feedforward_channels=256), (64, 48))
    v2 = Sapiens2VisionTransformer(
        dict(embed_dims=128, num_layers=2, num_heads=2,
             feedforward_channels=256),
        layer_cfgs=[{}, {'num_kv_heads': 1}]).eval()
    x = torch.randn(1, 3, 64, 48)
    for model in (v1, v2):
        calls = []
        real = sdpa.cpu_attention
        with torch.inference_mode(), torch.autocast('cpu', torch.bfloat16):
            with sdpa.sdpa_backend('torch', 'cpu'):
                ref = model(x)[0].float()
            sdpa.cpu_attention = lambda *a: calls.append(1) or real(*a)
            try:
                out = model(x)[0].float()
            finally:
                sdpa.cpu_attention = real
        assert len(calls) == 2  # one per layer
        assert (out - ref).abs().max() < 0.1
        assert (out - ref).abs().mean() < 0.01
