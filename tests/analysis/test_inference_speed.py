"""Throughput options of the benchmark against the eager / stock outputs:
the attention kernel choice (``sapiens_mm.utils.sdpa``), CUDA-graph replay
(``sapiens_mm.utils.cuda_graph_forward``), ``torch.compile`` modes and
channels-last weights.

Stated tolerances (tiny arch, 64x48 input, random weights):

- another attention kernel (flash vs math vs PyTorch's choice), fp32:
  max abs difference <= 1e-5 (features of magnitude ~1; the kernels differ
  in summation order only, float32 rounding is ~1e-7 per operation);
- channels-last weights, fp32: <= 1e-5 against stock mmpretrain (same
  reason: another convolution kernel order);
- compiled (any mode) vs eager, fp32: <= 1e-4 (as tests/apis/test_fast_inference);
- CUDA graph replay vs eager on the GPU: identical (the same kernels run).

The CUDA tests run only where a GPU is present (tools/analysis/
gpu_issue20.sh runs them on the GPU machine); on CPU the CUDA-only options
must refuse or fall back with a message.

Time: a few seconds, plus the C++ compilation of the compile-mode test
(about 40-80 s on a busy 2-core machine with a cold inductor cache).
"""
import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from tool_helpers import load_tool

from sapiens_mm.apis.benchmark import benchmark_model, build_backbone
from sapiens_mm.utils.cuda_graph_forward import CUDAGraphForward
from sapiens_mm.utils.sdpa import (
    SDPA_BACKENDS,
    resolve_sdpa_backend,
    sdpa_backend,
)

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason='needs a CUDA GPU')
KERNEL_ATOL = 1e-5


def tiny(hw=(64, 48)):
    torch.manual_seed(0)
    return build_backbone('sapiens_tiny', hw)


def _attention_ops(fn):
    """Names of the aten attention ops ``fn`` runs."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn()
    return {e.key for e in prof.key_averages()
            if 'scaled_dot_product' in e.key}


def test_each_cpu_kernel_is_the_one_that_runs_and_outputs_agree():
    model = tiny()
    x = torch.randn(2, 3, 64, 48)
    outs, ops = {}, {}
    for name in ('auto', 'flash', 'math'):
        with torch.inference_mode(), sdpa_backend(name, 'cpu') as used:
            assert used == name
            outs[name] = model(x)[0]
            ops[name] = _attention_ops(lambda: model(x))
    # the pinned kernel is the one PyTorch dispatched to
    assert any('flash' in op for op in ops['flash'])
    assert not any('flash' in op for op in ops['math'])
    assert any('math' in op for op in ops['math'])
    for name in ('flash', 'math'):
        torch.testing.assert_close(outs[name], outs['auto'], rtol=0,
                                   atol=KERNEL_ATOL)
    # the math kernel really computes softmax(q k^T / sqrt(d)) v
    q, k, v = torch.randn(3, 1, 2, 12, 8).unbind(0)
    ref = torch.softmax(q @ k.transpose(-1, -2) / 8**0.5, -1) @ v
    with sdpa_backend('math', 'cpu'):
        torch.testing.assert_close(
            F.scaled_dot_product_attention(q, k, v), ref, rtol=0,
            atol=KERNEL_ATOL)


def test_cuda_only_kernels_fall_back_on_cpu(caplog):
    model = tiny()
    x = torch.randn(1, 3, 64, 48)
    with torch.inference_mode():
        ref = model(x)[0]
        for name in ('cudnn', 'efficient'):
            assert resolve_sdpa_backend(name, 'cpu') == 'auto'
            with sdpa_backend(name, torch.device('cpu')) as used:
                assert used == 'auto'
                torch.testing.assert_close(model(x)[0], ref, rtol=0, atol=0)
    with pytest.raises(ValueError, match='Unknown SDPA backend'):
        resolve_sdpa_backend('fast', 'cpu')
    assert SDPA_BACKENDS[0] == 'auto'


def test_benchmark_options_keep_outputs_equal_to_stock():
    result = benchmark_model(
        tiny(), batch_size=2, img_size=(64, 48), warmup=0, repeats=2,
        compare_stock=True, rate_min_time=0, sdpa='math', channels_last=True)
    assert result['options'] == dict(compile_mode=None, sdpa='math',
                                     cuda_graph=False, channels_last=True)
    assert result['stock_max_abs_diff'] <= KERNEL_ATOL
    assert 'eager_max_abs_diff' not in result
    fallback = benchmark_model(tiny(), img_size=(64, 48), warmup=0,
                               repeats=1, rate_min_time=0, sdpa='cudnn')
    assert fallback['options']['sdpa'] == 'auto'


@pytest.mark.slow
def test_compile_mode_is_applied_and_matches_eager(monkeypatch):
    modes = []
    real = torch.nn.Module.compile

    def spy(self, *args, **kwargs):
        modes.append(kwargs.get('mode'))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(torch.nn.Module, 'compile', spy)
    result = benchmark_model(
        tiny(), img_size=(64, 48), warmup=1, repeats=1, rate_min_time=0,
        compare_stock=True, compile_mode='reduce-overhead')
    assert modes == ['reduce-overhead']
    assert result['compile'] and result['options']['compile_mode'] == \
        'reduce-overhead'
    assert result['eager_max_abs_diff'] <= 1e-4
    assert result['stock_max_abs_diff'] <= 1e-4
    with pytest.raises(ValueError, match='compile_mode'):
        benchmark_model(tiny(), compile_mode='fastest')


def test_cuda_graph_refuses_cpu():
    with pytest.raises(ValueError, match='CUDA'):
        CUDAGraphForward(lambda t: t * 2, torch.zeros(2))
    with pytest.raises(ValueError, match='cuda_graph needs a CUDA device'):
        benchmark_model(tiny(), device='cpu', cuda_graph=True)
    with pytest.raises(SystemExit, match='--cuda-graph needs a CUDA device'):
        load_tool('analysis/benchmark').main(
            ['--arch', 'sapiens_tiny', '--device', 'cpu', '--cuda-graph'])


@needs_cuda
def test_cuda_graph_replays_equal_eager_on_new_inputs():
    model = tiny().cuda().to(torch.bfloat16)

    def forward(x):
        with torch.inference_mode():
            return model(x)

    x1, x2 = torch.randn(2, 2, 3, 64, 48, device='cuda',
                         dtype=torch.bfloat16).unbind(0)
    graphed = CUDAGraphForward(forward, x1)
    for x in (x1, x2, x1):
        out = graphed(x)[0].clone()
        torch.testing.assert_close(out, forward(x)[0], rtol=0, atol=0)
    with pytest.raises(ValueError, match='captured for inputs of shape'):
        graphed(x1[:1])


@needs_cuda
@pytest.mark.parametrize('name', ['cudnn', 'flash', 'efficient'])
def test_cuda_kernels_match_math(name):
    """bf16 attention kernels against the math kernel in bf16: both round
    to bf16 (8 significant bits) in different orders, so 2 % of max |out|
    (as the bf16 tolerance of tests/apis/test_fast_inference)."""
    model = tiny().cuda().to(torch.bfloat16)
    x = torch.randn(2, 3, 64, 48, device='cuda', dtype=torch.bfloat16)
    with torch.inference_mode():
        with sdpa_backend('math', 'cuda'):
            ref = model(x)[0].float()
        with sdpa_backend(name, 'cuda'):
            out = model(x)[0].float()
    assert (out - ref).abs().max() <= 0.02 * ref.abs().max()


def test_train_flops_are_three_forward_passes_counted_on_real_tensors():
    """gpu_train_check counts FLOPs on the meta device with torch's
    counter; the benchmark's hook counter on real CPU tensors must agree."""
    import importlib.util
    from pathlib import Path

    from inference_helpers import small_cfg

    from sapiens_mm.apis.benchmark import count_work
    from sapiens_mm.apis.inference import init_model
    path = Path(__file__).resolve().parents[2] / 'tools' / 'analysis' / \
        'gpu_train_check.py'
    spec = importlib.util.spec_from_file_location('gpu_train_check', path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    cfg = small_cfg('seg')
    model = init_model(cfg)
    work = count_work(
        model, lambda: model(torch.randn(2, 3, 64, 48), mode='tensor'))
    assert work.flops('attention') > 0
    assert tool.train_flops(cfg, 2, (64, 48)) == 3 * work.flops()
