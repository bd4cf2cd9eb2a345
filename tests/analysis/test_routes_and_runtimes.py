"""The benchmark's comparisons of one model built two ways and run by
other runtimes: a model built through the registry (as mmengine's Runner
and tools/test.py build it) and given optimize_for_inference computes what
the init_model / class-built model computes, and the exported model run by
ONNX Runtime and OpenVINO computes what the PyTorch model computes.

OpenVINO runs in a child process: its threading runtime (TBB), once loaded,
crashes this process when a later test forks (DataLoader workers).

Tolerances: the float32 runtimes sum the same float32 products in their own
orders through two encoder layers: measured within 1.2e-5 of PyTorch's
outputs (of magnitude 2-3), held to 1e-4. OpenVINO in bf16 rounds the
inputs of every GEMM to bf16 (8 significant bits): measured within 0.012 of
the float32 outputs, held to two bf16 steps of the largest output
(2 * 2^-7 * max |out|, about 0.035).
"""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from tiny_configs import TINY
from tool_helpers import load_tool

from sapiens_mm.analysis import (backbone_config, build_backbone,
                                 build_exported_runtimes,
                                 build_registry_route, export_onnx)
from sapiens_mm.apis import init_model, optimize_for_inference
from sapiens_mm.utils.cpu_linear import PackedCpuLinear

BF16_STEP = 2.0**-7
FP32_ATOL = 1e-4


def _random_backbone(arch):
    torch.manual_seed(0)
    model = build_backbone(arch, (64, 48))
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    return model


def _first(out):
    while isinstance(out, (tuple, list)):
        out = out[0]
    return out


@pytest.fixture(scope='module')
def image():
    return torch.randn(2, 3, 64, 48,
                       generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize('arch', ['sapiens_tiny', 'sapiens2_tiny'])
def test_both_build_routes_compute_the_same(arch, image):
    """A backbone built by its class and the same one built from its config
    through mmpretrain's registry: the same outputs once both are given
    optimize_for_inference (bit for bit: the same packed GEMMs), and those
    of the plain model within float32 rounding."""
    ours = _random_backbone(arch)
    with torch.inference_mode():
        plain = _first(ours(image))
    routed = build_registry_route(ours,
                                  backbone_config(arch, (64, 48)))
    assert type(routed) is type(ours) and routed is not ours
    for model in (ours, routed):
        assert optimize_for_inference(model) is model
        assert any(isinstance(m, PackedCpuLinear) for m in model.modules())
    with torch.inference_mode():
        a, b = _first(ours(image)), _first(routed(image))
    assert torch.equal(a, b)
    torch.testing.assert_close(a, plain, rtol=0, atol=FP32_ATOL)


def test_task_model_routes_compute_the_same():
    """init_model's seg model and the same config built by mmseg's registry
    (the Runner's way) with its weights: equal outputs, both optimized."""
    model = init_model(str(TINY['seg']))
    routed = build_registry_route(model)
    assert type(routed) is type(model)
    x = torch.randn(1, 3, 64, 48, generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        plain = model(x, None, mode='tensor')
        optimize_for_inference(model)
        optimize_for_inference(routed)
        a = model(x, None, mode='tensor')
        b = routed(x, None, mode='tensor')
    assert torch.equal(a, b)
    torch.testing.assert_close(a, plain, rtol=0, atol=FP32_ATOL)
    with pytest.raises(ValueError, match='config of a backbone'):
        build_registry_route(torch.nn.Linear(2, 2))


@pytest.mark.parametrize('arch', ['sapiens_tiny', 'sapiens2_tiny'])
def test_onnxruntime_computes_the_pytorch_outputs(arch, image, tmp_path):
    model = _random_backbone(arch)
    with torch.inference_mode():
        want = _first(model(image))
    path = export_onnx(model, image, str(tmp_path / 'model.onnx'))
    runtimes = build_exported_runtimes(path, ['onnxruntime'], threads=1)
    assert list(runtimes) == ['onnxruntime fp32']
    got = runtimes['onnxruntime fp32'](image)
    assert got.dtype == torch.float32 and got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=0, atol=FP32_ATOL)


#: The OpenVINO check, run in a child process (see the module's notes):
#: prints the largest output and each precision's largest difference from
#: the float32 PyTorch model.
OPENVINO_CHILD = textwrap.dedent('''
    import json, sys
    import torch
    sys.path.insert(0, sys.argv[2])
    from test_routes_and_runtimes import _first, _random_backbone
    from sapiens_mm.analysis import build_exported_runtimes, export_onnx
    image = torch.randn(2, 3, 64, 48,
                        generator=torch.Generator().manual_seed(1))
    model = _random_backbone(sys.argv[1])
    with torch.inference_mode():
        want = _first(model(image))
    path = export_onnx(model, image, sys.argv[3])
    result = dict(max=float(want.abs().max()))
    for dtype in ('fp32', 'bf16'):
        run = build_exported_runtimes(path, ['openvino'], dtype,
                                      threads=1)[f'openvino {dtype}']
        got = run(image)
        assert got.shape == want.shape, (got.shape, want.shape)
        result[dtype] = float((got - want).abs().max())
    print(json.dumps(result))
''')


@pytest.mark.parametrize('arch', ['sapiens_tiny', 'sapiens2_tiny'])
def test_openvino_computes_the_pytorch_outputs(arch, tmp_path):
    pytest.importorskip('openvino')
    here = Path(__file__).resolve().parent
    proc = subprocess.run(
        [sys.executable, '-c', OPENVINO_CHILD, arch, str(here),
         str(tmp_path / 'model.onnx')],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ,
                 PYTHONPATH=str(here.parent / 'helpers')))
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result['fp32'] <= FP32_ATOL, result
    assert result['bf16'] <= 2 * BF16_STEP * result['max'], result


def test_runtime_names_are_checked(tmp_path):
    with pytest.raises(ValueError, match='Unknown runtimes'):
        build_exported_runtimes(str(tmp_path / 'm.onnx'), ['tensorrt'])


def test_cli_compares_routes_and_runtimes(tmp_path):
    """One run: the registry route and ONNX Runtime timed beside our model,
    each also against the registry route; the weights' bytes beside the
    peak memory (OpenVINO's rows: the test above, in a child process)."""
    runtimes = ['onnxruntime']
    lines = []
    path = tmp_path / 'r.json'
    load_tool('analysis/benchmark').main([
        '--arch', 'sapiens2_tiny', '--img-size', '64', '48', '--warmup', '0',
        '--repeats', '1', '--device', 'cpu', '--compare-routes',
        '--compare-runtimes', *runtimes, '--json', str(path),
        '--system-malloc'
    ], echo=lines.append)
    out = '\n'.join(lines)
    assert 'malloc: the system setting' in out
    assert 'registry route' in out and 'onnxruntime fp32' in out
    assert 'against the registry route: speed ratio' in out
    assert 'weights             ' in out and 'linear weights packed in fp32'\
        in out
    comparisons = json.loads(path.read_text())['model_only']['comparisons']
    assert comparisons['registry route']['max_abs_diff'] == 0.0
    for label in ['onnxruntime fp32']:
        assert comparisons[label]['max_abs_diff'] <= FP32_ATOL
        assert set(comparisons[label]['speedup_vs']) == {'registry route'}
    weights = json.loads(path.read_text())['model_only']['weights']
    model = build_backbone('sapiens2_tiny', (64, 48))
    linear = sum(m.weight.numel() * 4 for m in model.modules()
                 if type(m) is torch.nn.Linear)
    assert weights['packed'] == linear
    assert weights['total'] == sum(
        t.numel() * t.element_size()
        for t in list(model.parameters()) + list(model.buffers()))
