"""The benchmark tool on Sapiens2 backbones: FLOPs of the GQA shapes, the
attention timed with the model's own K/V heads, the plain-PyTorch reference
as the comparison, and the CLI."""
import json

import pytest
import torch
from tool_helpers import load_tool
from torch.utils.flop_counter import FlopCounterMode

from sapiens_mm.apis.benchmark import (benchmark_model, build_backbone,
                                       count_work, kernel_calls)
from sapiens_mm.models import Sapiens2VisionTransformer

main = load_tool('analysis/benchmark').main

C, FFN, HEADS, HD = 64, 128, 4, 16  # sapiens2_tiny


def gqa_tiny():
    torch.manual_seed(0)
    return Sapiens2VisionTransformer(
        'sapiens2_tiny', layer_cfgs=[{}, {'num_kv_heads': 2}]).eval()


def test_flops_by_hand_with_a_gqa_block():
    model = gqa_tiny()
    x = torch.randn(2, 3, 64, 48)
    work = count_work(model, lambda: model(x))
    b, t = 2, 4 * 3
    n = 9 + t  # CLS + 8 registers + patches

    def block(kv_dims):
        return 2 * b * n * (C * C + 2 * C * kv_dims + C * C + C * 2 * FFN +
                            FFN * C)

    patch = 2 * b * t * (3 * 16 * 16) * C
    assert work.flops('matmul') == patch + block(C) + block(2 * HD)
    # QK^T and AV over all query heads, GQA or not.
    assert work.flops('attention') == 2 * 4 * b * HEADS * n * n * HD
    with FlopCounterMode(display=False) as counter:
        model(x)
    # torch's own count of the matmul-like ops (it counts no FLOPs for
    # the CPU SDPA kernel).
    assert work.flops('matmul') == counter.get_total_flops()
    shapes = {it.shape for it in work.items if it.kind == 'matmul'}
    assert (b * n, C, 2 * HD) in shapes and (b * n, C, C) in shapes


def test_gqa_attention_is_timed_with_its_own_kv_heads():
    model = gqa_tiny()
    work = count_work(model, lambda: model(torch.randn(1, 3, 32, 32)))
    att = [it for it in work.items if it.kind == 'attention']
    kv_heads = sorted(it.shape[1][0][1] for it in att)
    assert kv_heads == [2, 4]
    gqa = next(it for it in att if it.shape[1][0][1] == 2)
    assert work.attention_args[gqa][1] == dict(enable_gqa=True)
    calls = kernel_calls(work, torch.device('cpu'))
    out = calls[gqa]()  # K/V with 2 heads: runs only with enable_gqa
    assert out.shape == gqa.shape[0][0]


@pytest.mark.parametrize('dtype', ['fp32', 'bf16'])
def test_benchmark_against_the_plain_reference(dtype):
    result = benchmark_model(gqa_tiny(), batch_size=2, img_size=(64, 48),
                             dtype=dtype, warmup=0, repeats=2,
                             compare_stock=True, rate_min_time=0)
    assert result['stock_label'] == 'plain reference'
    assert len(result['stock_latency'].times) == 2
    assert result['limit_s']['attention'] > 0
    assert 0 < result['achieved_over_limit']
    # fp32: two implementations' float rounding; bf16 (weights cast):
    # bf16 rounding in every op of 2 blocks, outputs of size ~3.
    tol = 1e-4 if dtype == 'fp32' else 0.25
    assert result['stock_max_abs_diff'] < tol


def test_layers_keep_the_kv_heads_of_the_full_model():
    with torch.device('meta'):
        model = build_backbone('sapiens2_0.4b', num_layers=10)
    assert [b.attn.num_kv_heads for b in model.blocks] == [16] * 8 + [8] * 2


def test_cli(tmp_path):
    out = tmp_path / 'r.json'
    lines = []  # the report (tools/analysis/benchmark.py prints it)
    main(['--arch', 'sapiens2_tiny', '--img-size', '64', '48',
          '--compare-stock', '--warmup', '0', '--repeats', '1', '--json',
          str(out)], echo=lines.append)
    text = '\n'.join(lines)
    assert 'plain reference' in text and '(2 kv heads)' not in text
    result = json.loads(out.read_text())['model_only']
    assert result['stock_label'] == 'plain reference'
    with pytest.raises(SystemExit, match='sapiens2_0.4b'):
        main(['--arch', 'sapiens2_2b'])
