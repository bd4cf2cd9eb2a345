"""tools/analysis/attention_kernels.py on small sizes: every route is timed
and each attention route's error against float64 is printed, small for the
exact kernels."""
import os
import re

import pytest
from tool_helpers import load_tool

from sapiens_mm.utils.sdpa import cpu_attention_available

tool = load_tool('analysis/attention_kernels')


@pytest.mark.parametrize('dtype, kv_heads', [('bf16', None), ('fp32', '1')])
def test_routes_timed_with_errors(capsys, dtype, kv_heads):
    argv = ['--dtype', dtype, '--tokens', '40', '--heads', '2', '--ffn',
            '256', '--rounds', '1', '--min-time', '0.01']
    if kv_heads:
        argv += ['--kv-heads', kv_heads]
    assert tool.main(argv) == 0
    out = capsys.readouterr().out
    rows = {line[:40].strip(): line[40:].split()
            for line in out.splitlines()
            if not line.startswith('WARNING') and 'not available' not in line
            and not line.startswith(('fp32,', 'bf16,', 'route'))}
    assert tool.GEMMS in rows and rows[tool.GEMMS][3] == '1.00'
    names = ['F.scaled_dot_product_attention']
    if cpu_attention_available(tool.DTYPES[dtype]):
        names.append(f'{dtype} CPU kernel (sapiens_mm)')
    # bf16: a few bf16 roundings of values ~0.3; float32: ~1e-6
    bound = 0.05 if dtype == 'bf16' else 1e-5
    for name in names:
        err = float(rows[name][-1])
        assert re.fullmatch(r'\d+', rows[name][0]) and 0 <= err < bound


def test_malloc_kept_as_in_inference(monkeypatch):
    """The tool times its routes with malloc keeping freed memory, as
    init_model and the benchmark run the models (else every call that
    returns a large tensor also pays its page faults)."""
    calls = []
    monkeypatch.setattr(tool, 'keep_freed_memory',
                        lambda: calls.append(1) or True)
    assert tool.main(['--tokens', '16', '--heads', '1', '--ffn', '64',
                      '--rounds', '1', '--min-time', '0']) == 0
    assert calls == [1]


@pytest.mark.slow  # three Python processes
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2,
                    reason='needs two CPUs')
def test_pinned_pair_mode(capsys):
    """--pinned-pair: a round of one pinned process alone and two at once;
    each child runs one thread (PyTorch's count follows the affinity of one
    core) and the ratio is printed."""
    assert tool.main(['--pinned-pair', '--rounds', '1', '--min-time', '0.05',
                      '--tokens', '32', '--heads', '1']) == 0
    out = capsys.readouterr().out.splitlines()
    row = out[2].split()
    assert row[0] == '1' and row[4] == '1/1/1'
    alone, first, second, ratio = (float(row[i]) for i in (1, 2, 3, 5))
    assert min(alone, first, second) > 0
    assert ratio == pytest.approx((first + second) / 2 / alone, abs=0.01)
    assert out[3].startswith('pair / alone: median ')
