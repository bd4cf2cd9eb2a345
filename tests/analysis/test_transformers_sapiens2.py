"""--compare-transformers: Hugging Face Transformers' Sapiens2 port on our
weights (test-only dependency; skipped without it).

Transformers computes RoPE in float32 where the official model uses bf16:
with our RoPE in float32 too, the two implementations agree to float32
rounding (measured ~1e-6 on these outputs); with the official bf16 RoPE they
differ by about 1e-3 relative.
"""
import pytest
import torch

from sapiens_mm.analysis import benchmark_model, build_transformers_sapiens2
from sapiens_mm.models import Sapiens2VisionTransformer

pytest.importorskip('transformers', minversion='5.10')


def _tiny(rope_dtype):
    torch.manual_seed(0)
    model = Sapiens2VisionTransformer(
        'sapiens2_tiny',
        layer_cfgs=[dict(layer_scale_init_value=0.5),
                    dict(num_kv_heads=2, layer_scale_init_value=0.5)],
        rope_dtype=rope_dtype).eval()
    return model


def test_same_weights_same_outputs():
    x = torch.randn(2, 3, 64, 48)
    ours = _tiny('fp32')
    theirs = build_transformers_sapiens2(ours)
    with torch.no_grad():
        a, b = ours(x)[0], theirs(x)[0]
    assert a.shape == b.shape == (2, 9 + 12, 64)
    torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-4)
    with pytest.raises(TypeError, match='Sapiens2 backbone'):
        build_transformers_sapiens2(torch.nn.Linear(2, 2))


def test_benchmark_compares_in_the_same_rounds():
    model = _tiny('bf16')
    result = benchmark_model(
        model, img_size=(64, 48), warmup=0, repeats=2, rate_min_time=0,
        compare_with=dict(transformers=build_transformers_sapiens2(model)))
    hf = result['comparisons']['transformers']
    assert len(hf['latency'].times) == 2
    # bf16 RoPE (ours) against float32 RoPE (theirs), features of size ~1
    assert 0 < hf['max_abs_diff'] < 0.05
