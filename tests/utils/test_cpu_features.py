"""What the package runs on which CPU (sapiens_mm.utils.cpu_features), from
PyTorch's own capability checks: patched here to the reports of other
CPUs, x86 and ARM, as PyTorch gives them there (torch.cpu.get_capabilities
from cpuinfo; oneDNN's bf16 / ACL checks). The real AVX2-only CPU runs in
tests/test_emulated_cpu.py.
"""
import subprocess
import sys
import textwrap

import pytest
import torch
from log_helpers import logged_warnings

from sapiens_mm.apis.inference import auto_dtype
from sapiens_mm.utils import cpu_features

AVX512 = dict(avx512_f=True, avx512_bw=True, avx512_dq=True,
              avx512_vl=True, fma3=True, avx2=True)
# name -> (torch.cpu.get_capabilities(), oneDNN runs bf16, oneDNN has ACL)
CPUS = {
    'Haswell (AVX2)': (dict(architecture='x86_64', avx2=True, fma3=True),
                       False, False),
    'Skylake-X (AVX-512, no BF16)': (dict(architecture='x86_64', **AVX512),
                                     True, False),
    'Zen 4 / Cooper Lake (AVX512_BF16)': (dict(
        architecture='x86_64', avx512_bf16=True, **AVX512), True, False),
    'Sapphire Rapids (AMX)': (dict(architecture='x86_64', avx512_bf16=True,
                                   amx_bf16=True, amx_tile=True, **AVX512),
                              True, False),
    'Graviton 2 (Neoverse N1)': (dict(architecture='aarch64', neon=True,
                                      dot=True), False, True),
    'Graviton 3 (Neoverse V1)': (dict(architecture='aarch64', neon=True,
                                      bf16=True, sve=True, i8mm=True),
                                 True, True),
    'Apple M1 under Linux': (dict(architecture='aarch64', neon=True,
                                  dot=True), False, True),
    'Apple M2 under Linux': (dict(architecture='aarch64', neon=True,
                                  bf16=True, i8mm=True), True, True),
}
# name -> (C kernels, packed bf16 linear, packed float32 linear, auto dtype)
EXPECTED = {
    'Haswell (AVX2)': (False, False, True, torch.float32),
    'Skylake-X (AVX-512, no BF16)': (False, True, True, torch.float32),
    'Zen 4 / Cooper Lake (AVX512_BF16)': (True, True, True, torch.bfloat16),
    'Sapphire Rapids (AMX)': (True, True, True, torch.bfloat16),
    'Graviton 2 (Neoverse N1)': (False, False, True, torch.float32),
    'Graviton 3 (Neoverse V1)': (False, True, True, torch.bfloat16),
    'Apple M1 under Linux': (False, False, True, torch.float32),
    'Apple M2 under Linux': (False, True, True, torch.bfloat16),
}


def _pretend(monkeypatch, name):
    caps, bf16, acl = CPUS[name]
    monkeypatch.setattr(torch.cpu, 'get_capabilities', lambda: dict(caps))
    monkeypatch.setattr(torch.ops.mkldnn, '_is_mkldnn_bf16_supported',
                        lambda: bf16)
    monkeypatch.setattr(torch.ops.mkldnn, '_is_mkldnn_acl_supported',
                        lambda: acl)
    cpu_features.packed_linear_supported.cache_clear()


@pytest.fixture(autouse=True)
def _fresh_answers():
    cpu_features.packed_linear_supported.cache_clear()
    yield
    cpu_features.packed_linear_supported.cache_clear()


@pytest.mark.parametrize('name', sorted(CPUS))
def test_paths_per_cpu(monkeypatch, name):
    _pretend(monkeypatch, name)
    kernels, packed_bf16, packed_f32, auto = EXPECTED[name]
    assert cpu_features.cpu_kernels_supported() == kernels
    assert cpu_features.packed_linear_supported(torch.bfloat16) == packed_bf16
    assert cpu_features.packed_linear_supported(torch.float32) == packed_f32
    assert not cpu_features.packed_linear_supported(torch.float64)
    assert auto_dtype('cpu') == auto


def test_packed_linear_answer_matches_what_onednn_does_here():
    """On this machine the answer is what oneDNN's packing actually does:
    bf16 packs where the check says so, raises where it does not."""
    w = torch.randn(32, 16)
    for dtype in (torch.float32, torch.bfloat16):
        try:
            torch.ops.mkldnn._reorder_linear_weight(w.to(dtype))
            packs = True
        except RuntimeError:
            packs = False
        assert cpu_features.packed_linear_supported(dtype) == packs


def test_slow_dtype_is_said_once(monkeypatch):
    monkeypatch.setattr(cpu_features, '_advised', False)
    _pretend(monkeypatch, 'Haswell (AVX2)')
    with logged_warnings() as lines:
        cpu_features.log_cpu_dtype_advice(torch.float32)
        cpu_features.log_cpu_dtype_advice(torch.bfloat16)
        cpu_features.log_cpu_dtype_advice(torch.bfloat16)
    assert len(lines) == 1
    assert 'emulated bf16' in lines[0] and "dtype='auto' picks float32" in (
        lines[0]) and 'linear layers' in lines[0]
    monkeypatch.setattr(cpu_features, '_advised', False)
    _pretend(monkeypatch, 'Graviton 3 (Neoverse V1)')
    with logged_warnings() as lines:
        cpu_features.log_cpu_dtype_advice(torch.bfloat16)
    assert lines == []


def test_arm_cpu_runs_pytorchs_ops_and_packed_bf16(tmp_path):
    """A Graviton 3 as PyTorch reports it, from the process's start: the C
    kernels stay unloaded (one line says why), attention / RMSNorm / RoPE
    run PyTorch's ops, the linear layers oneDNN's packed bf16 route, and
    the bf16 Sapiens2 backbone gives what it gives with the C kernels
    (within bf16 rounding, as the two attention kernels differ)."""
    caps, _, _ = CPUS['Graviton 3 (Neoverse V1)']
    code = textwrap.dedent(f'''
        import torch
        torch.cpu.get_capabilities = lambda: {caps!r}
        torch.ops.mkldnn._is_mkldnn_acl_supported = lambda: True
        import sapiens_mm
        from sapiens_mm.apis.inference import auto_dtype
        from sapiens_mm.models import Sapiens2VisionTransformer
        from sapiens_mm.utils import cpu_kernels, cpu_linear
        torch.manual_seed(0)
        model = Sapiens2VisionTransformer(
            dict(embed_dims=128, num_layers=2, num_heads=2,
                 feedforward_channels=256)).eval().bfloat16()
        packed = cpu_linear.pack_cpu_linears(model)
        x = torch.randn(1, 3, 64, 48).bfloat16()
        with torch.inference_mode():
            y = model(x)[0].float()
        on_packed_route = all(
            m._packed is not None for m in model.modules()
            if isinstance(m, cpu_linear.PackedCpuLinear))
        torch.save(y, 'arm.pt')
        print(auto_dtype('cpu'), packed > 0, on_packed_route,
              cpu_kernels.cpu_kernel('sapiens_attention_bf16'))
        ''')
    proc = subprocess.run([sys.executable, '-c', code], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout.strip().splitlines()[-1]
    assert out == 'torch.bfloat16 True True None'
    assert "lacks the C kernels' instructions" in proc.stdout + proc.stderr
    arm = torch.load(tmp_path / 'arm.pt')
    from sapiens_mm.models import Sapiens2VisionTransformer
    from sapiens_mm.utils import cpu_linear
    torch.manual_seed(0)
    model = Sapiens2VisionTransformer(
        dict(embed_dims=128, num_layers=2, num_heads=2,
             feedforward_channels=256)).eval().bfloat16()
    cpu_linear.pack_cpu_linears(model)
    x = torch.randn(1, 3, 64, 48).bfloat16()
    with torch.inference_mode():
        here = model(x)[0].float()
    # Each of 2 layers adds a few bf16 roundings that differ between
    # PyTorch's attention / norm and the C kernels: features ~1-4 agree
    # to 0.1 (max) and 0.01 (mean), as in test_cpu_attention.py.
    assert (arm - here).abs().max() < 0.1
    assert (arm - here).abs().mean() < 0.01
