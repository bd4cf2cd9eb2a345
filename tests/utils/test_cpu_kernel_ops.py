"""The C kernels as PyTorch sees them (sapiens_mm.utils.cpu_kernels): custom
ops that torch.export records and torch.compile keeps, left out by
pytorch_ops_only(), computed on PyTorch's own intra-op threads.

The model is a 2-layer Sapiens2 backbone with head size 64 (the released
models'), whose layers call all three ops: RMSNorm, RoPE, attention.
"""
import os
import threading

import pytest
import torch

from sapiens_mm.models import Sapiens2VisionTransformer
from sapiens_mm.models.layers import rms_norm as rms_module
from sapiens_mm.models.layers import rope_position_embedding as rope_module
from sapiens_mm.utils import cpu_kernels, sdpa

pytestmark = pytest.mark.skipif(
    not sdpa.cpu_attention_available(),
    reason='needs a CPU with AVX512_BF16 and the kernels built')

OPS = {'sapiens_mm.cpu_attention.default', 'sapiens_mm.cpu_rms_norm.default',
       'sapiens_mm.cpu_rope.default'}


def _backbone():
    torch.manual_seed(0)
    return Sapiens2VisionTransformer(
        dict(embed_dims=128, num_layers=2, num_heads=2,
             feedforward_channels=256),
        layer_cfgs=[{}, {'num_kv_heads': 1}]).eval()


class _KernelCalls:
    """Counts the C kernel calls of each op (the ops' implementations look
    the kernel functions up at each call)."""

    def __init__(self, monkeypatch):
        self.counts = dict(attention=0, rms_norm=0, rope=0)
        for module, attr, key in ((sdpa, 'cpu_attention', 'attention'),
                                  (rms_module, 'rms_norm', 'rms_norm'),
                                  (rope_module, 'rope_bf16', 'rope')):
            monkeypatch.setattr(module, attr, self._spy(
                getattr(module, attr), key))

    def _spy(self, real, key):

        def spy(*args):
            out = real(*args)
            self.counts[key] += out is not None
            return out

        return spy


def _op_targets(program) -> set:
    return {str(n.target) for n in program.graph.nodes
            if n.op == 'call_function'}


def test_export_records_the_ops_and_pytorch_ops_only_leaves_them_out():
    model = _backbone()
    x = torch.randn(1, 3, 64, 48)
    with torch.no_grad():
        program = torch.export.export(model, (x, ), strict=False)
        with cpu_kernels.pytorch_ops_only():
            portable = torch.export.export(model, (x, ), strict=False)
        eager = model(x)[0]
        recorded = program.module()(x)[0]
        plain = portable.module()(x)[0]
    assert OPS <= _op_targets(program)
    assert not {t for t in _op_targets(portable) if 'sapiens_mm' in t}
    # The recorded program runs the same kernels in the same order: the
    # same bits as eager.
    assert torch.equal(recorded, eager)
    # PyTorch's ops: float32 sums in another order (attention, norms),
    # the same bf16 RoPE bits: within float32 rounding of features ~1.
    torch.testing.assert_close(plain, eager, rtol=1e-4, atol=1e-5)


@pytest.mark.slow  # Inductor compiles for ~20 s on 2 cores
def test_compiled_model_keeps_the_kernels_and_the_values(monkeypatch):
    model = _backbone()
    x = torch.randn(1, 3, 64, 48)
    with torch.no_grad():
        eager = model(x)[0]
        compiled = torch.compile(model, fullgraph=True)
        calls = _KernelCalls(monkeypatch)
        out = compiled(x)[0]
    # every call of the compiled graph went to a C kernel: 2 layers x
    # (attention; RMSNorm before attention, before the FFN, of q and of k;
    # RoPE of q and of k)
    assert calls.counts == dict(attention=2, rms_norm=8, rope=4)
    # Inductor fuses and reorders the float32 element-wise work around
    # the ops: differences at float32 rounding level on features ~1.
    torch.testing.assert_close(out, eager, rtol=1e-4, atol=1e-5)


def test_the_kernels_run_on_pytorchs_threads():
    """During attention calls no thread appears in the process beyond
    PyTorch's own OpenMP workers (already started by a GEMM): the kernel's
    parallel region runs on them, not on threads of its own or of a second
    OpenMP runtime, and only one OpenMP runtime is loaded."""
    old = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        a = torch.randn(512, 512)
        a @ a  # MKL and ATen loops start PyTorch's 2 OpenMP threads
        torch.randn(1 << 22).exp()
        q, k, v = (torch.randn(1, 16, 1024, 64).bfloat16() for _ in range(3))
        seen, stop = set(), threading.Event()
        started = threading.Event()
        watcher = []

        def watch():
            watcher.append(str(threading.get_native_id()))
            started.set()
            while not stop.is_set():
                seen.update(os.listdir('/proc/self/task'))

        thread = threading.Thread(target=watch)
        thread.start()
        started.wait()
        before = set(os.listdir('/proc/self/task'))
        for _ in range(4):  # ~50 ms each: the watcher samples throughout
            assert sdpa.cpu_attention(q, k, v) is not None
        stop.set()
        thread.join()
    finally:
        torch.set_num_threads(old)
    assert seen and seen - before == set()
    assert len(cpu_kernels.openmp_runtimes()) == 1
