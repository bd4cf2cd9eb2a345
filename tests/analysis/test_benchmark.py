"""The benchmark (sapiens_mm.analysis): FLOP counts against hand counts and
torch's counter, the limit on known rates, the timings and ratios against
independent timings (models that sleep a known time), the end-to-end
accounting, warnings, the deprecated import path and the CLI.

Tiny arch at small inputs; about 20 s on a busy 2-core machine.

The benchmark tool on Sapiens2 backbones: FLOPs of the GQA shapes, the
attention timed with the model's own K/V heads, the plain-PyTorch reference
as the comparison, and the CLI.
"""
import importlib
import json
import math
import sys
import time
import warnings

import cv2
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from inference_helpers import image, small_cfg
from tiny_configs import TINY
from tool_helpers import load_tool
from torch.utils.flop_counter import FlopCounterMode

from sapiens_mm.analysis import (
    PeakMemory,
    TimingStats,
    Work,
    benchmark_model,
    build_backbone,
    build_stock_backbone,
    count_work,
    end_to_end,
    format_report,
    gemm_limit_seconds,
    gemm_rate,
    kernel_calls,
    kernel_limit_seconds,
    limit_warnings,
    measure_rates,
)
from sapiens_mm.apis import SapiensInferencer, init_model
from sapiens_mm.models import Sapiens2VisionTransformer
from sapiens_mm.utils import sdpa

benchmark_tool = load_tool('analysis/benchmark')
main = benchmark_tool.main

C, FFN, LAYERS, HEADS = 64, 128, 2, 2  # sapiens_tiny


def tiny(hw=(64, 48)):
    torch.manual_seed(0)
    return build_backbone('sapiens_tiny', hw)


class Sleeper(torch.nn.Module):
    """A model whose forward pass takes ``seconds`` (sleeping) plus one
    small linear layer, and that records its calls in ``log``."""

    def __init__(self, seconds: float, name: str, log: list):
        super().__init__()
        self.seconds, self.name, self.log = seconds, name, log
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        self.log.append(self.name)
        time.sleep(self.seconds)
        return self.lin(x.flatten(1)[:, :8])


# --------------------------------------------------------------- FLOPs
def test_flops_by_hand_and_against_torch_counter():
    model = tiny()
    x = torch.randn(2, 3, 64, 48)
    work = count_work(model, lambda: model(x))
    b, t = 2, (64 // 16) * (48 // 16)
    per_layer = 2 * b * t * (C * 3 * C + C * C + C * FFN + FFN * C)
    patch = 2 * b * t * (3 * 16 * 16) * C
    assert work.flops('matmul') == LAYERS * per_layer + patch
    d = C // HEADS
    assert work.flops('attention') == LAYERS * 4 * b * HEADS * t * t * d
    # independent reference for the matmul-like part (its sdpa count is 0)
    with FlopCounterMode(display=False) as counter:
        model(x)
    assert work.flops('matmul') == counter.get_total_flops()
    shapes = {it.shape for it in work.items if it.kind == 'matmul'}
    assert (b * t, C, 3 * C) in shapes and (b * t, 768, C) in shapes


def test_task_model_conv_and_deconv_flops_match_torch_counter():
    """Seg head: 4x4 stride-2 deconvolutions and 1x1 / 3x3 convolutions,
    counted as their equivalent GEMMs."""
    model = init_model(small_cfg('seg'))
    x = torch.randn(1, 3, 64, 48)
    work = count_work(model, lambda: model(x, mode='tensor'))
    with FlopCounterMode(display=False) as counter:
        model(x, mode='tensor')
    assert work.flops('matmul') == counter.get_total_flops()
    assert work.flops('attention') > 0


def test_the_model_attention_function_is_recorded_and_restored():
    model = tiny()
    for layer in model.layers:
        assert layer.attn.scaled_dot_product_attention is \
            sdpa.scaled_dot_product_attention
    x = torch.randn(1, 3, 64, 48)
    work = count_work(model, lambda: model(x))
    assert set(work.attention_fns.values()) == {
        sdpa.scaled_dot_product_attention}
    assert model.layers[0].attn.scaled_dot_product_attention is \
        sdpa.scaled_dot_product_attention  # the recorder is removed
    (item, ) = [it for it in work.items if it.kind == 'attention']
    # q, k, v are views of one qkv output: one shared storage
    assert [spec[-1] for spec in item.shape] == [0, 0, 0]


def test_rates_rebuild_shared_qkv_views():
    seen = []

    def attn(q, k, v):
        seen.append((q.untyped_storage().data_ptr() ==
                     k.untyped_storage().data_ptr(), q.stride()))
        return F.scaled_dot_product_attention(q, k, v)

    qkv = torch.randn(1, 12, 3, 2, 32).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scaled_dot_product_attention = attn
            self.lin = torch.nn.Linear(64, 32)

        def forward(self):
            self.lin(torch.randn(10, 64))
            return self.scaled_dot_product_attention(q, k, v)

    m = M()
    work = count_work(m, m)
    rates = measure_rates(work, torch.device('cpu'), repeats=1, min_time=0)
    assert len(seen) >= 2  # the model's call and the timed ones
    assert all(shared and stride == q.stride() for shared, stride in seen)
    assert set(rates) == set(work.items)
    assert work.flops('matmul') == 40960  # 2 * 10 * 64 * 32
    assert work.flops('attention') == 36864  # 2 * 2 * 12 * 12 * (32 + 32)


# -------------------------------------------------------------- limit
def _two_item_work():
    """One 10x64 -> 32 matmul (40960 FLOPs) and one attention call (36864
    FLOPs), as count_work records them."""

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scaled_dot_product_attention = F.scaled_dot_product_attention
            self.lin = torch.nn.Linear(64, 32)

        def forward(self):
            self.lin(torch.randn(10, 64))
            q = torch.randn(1, 2, 12, 32)
            return self.scaled_dot_product_attention(q, q, q)

    m = M()
    return count_work(m, m)


def test_limit_counts_attention_at_the_gemm_rate():
    work = _two_item_work()
    # known rates: GEMM 1 GFLOP/s, the attention kernel 4x slower
    rates = {it: 1e9 if it.kind == 'matmul' else 2.5e8 for it in work.items}
    assert gemm_rate(work, rates) == pytest.approx(1e9)
    assert gemm_limit_seconds(work, rates) == pytest.approx(77824e-9)
    assert kernel_limit_seconds(work, rates) == pytest.approx(
        40960e-9 + 36864e-9 * 4)
    with pytest.raises(ValueError, match='no matmul'):
        gemm_rate(Work(), {})


def test_gemm_rate_is_flop_weighted_over_the_shapes():
    """Two matmul shapes, 1 and 3 GFLOP/s on equal FLOPs: the pass takes
    0.5/1 + 0.5/3 of its FLOPs in seconds per GFLOP, a rate of 1.5."""
    lin = torch.nn.Linear(16, 16)
    model = torch.nn.Sequential(lin, lin)
    work = count_work(model, lambda: model(torch.randn(4, 16)))
    (item, ) = work.items  # the same shape twice
    assert work.items[item] == 2
    a, b = item, type(item)('matmul', (1, 1, 1), item.dtype, item.flops)
    work.items = {a: 1, b: 1}
    assert gemm_rate(work, {a: 1e9, b: 3e9}) == pytest.approx(1.5e9)


def test_warnings_on_spread_and_on_beating_the_limit():
    assert limit_warnings(0.9, {'model latency': 1.1}) == []
    (w, ) = limit_warnings(1.3, {})
    assert 'achieved/limit 1.300 > 1' in w
    (w, ) = limit_warnings(0.5, {'model latency': 1.5})
    assert 'model latency' in w and '50 %' in w


def test_timing_stats():
    s = TimingStats([5.0, 1.0, 4.0, 2.0, 3.0])
    assert (s.median, s.min, s.max) == (3.0, 1.0, 5.0)
    assert s.iqr == pytest.approx(2.0)  # quartiles 2 and 4
    assert s.spread == 5.0 and '400 %' in s.spread_warning
    assert TimingStats([7.0]).iqr == 0.0
    assert TimingStats([1.0, 1.1]).spread_warning is None


def test_peak_memory_sees_a_temporary_allocation():
    import mmap

    # 64 MiB mapped and touched outside malloc, which may already hold
    # freed memory (keep_freed_memory) that a malloc'ed buffer would reuse
    with PeakMemory(torch.device('cpu')) as mem:
        buf = mmap.mmap(-1, 64 * 2**20)
        np.frombuffer(buf, np.uint8)[:] = 1
        buf.close()
    if not mem.exact:
        pytest.skip('no resettable VmHWM on this system')
    assert mem.peak - mem.base >= 60 * 2**20


# ------------------------------------------------------ model timings
def test_latency_and_speedup_against_known_sleeps():
    """Our model sleeps 60 ms, the comparison 150 ms: the latencies and
    their ratio come out of the benchmark as slept (sleep overshoots by a
    few ms on a loaded machine, never undershoots), measured in rounds
    whose first model alternates."""
    log = []
    ours = Sleeper(0.06, 'ours', log)
    slow = Sleeper(0.15, 'slow', log)
    result = benchmark_model(ours, img_size=(16, 16), warmup=0, repeats=4,
                             rate_min_time=0, compare_with=dict(slow=slow))
    lat = result['latency']
    assert len(lat.times) == 4
    # upper bounds: twice the sleep (a run counted twice would reach it)
    assert 0.06 <= lat.min and lat.median < 0.12
    other = result['comparisons']['slow']
    assert 0.15 <= other['latency'].min < 0.3
    # 2.5 as slept; at most 0.15 / 0.12 when our sleeps overshoot by load
    assert 1.25 < other['speedup'] <= 2.6
    assert 1.25 < other['min_speedup'] <= 2.6
    assert other['max_abs_diff'] is not None  # same output shape
    assert result['images_per_s'] == pytest.approx(1 / lat.median)
    # the counting pass (ours), then rounds: ours first, slow first, ...
    assert log[1:] == ['ours', 'slow', 'slow', 'ours'] * 2
    # 60 ms of sleep against a limit of microseconds: far below it
    assert result['achieved_over_limit'] < 0.1
    assert result['achieved_over_limit_min'] < 0.1


@pytest.mark.parametrize('dtype,precision', [('fp32', 'cast'),
                                             ('bf16', 'autocast')])
def test_benchmark_and_stock_comparison(dtype, precision):
    result = benchmark_model(
        tiny(), batch_size=2, img_size=(64, 48), dtype=dtype,
        precision=precision, warmup=0, repeats=2, compare_stock=True,
        rate_min_time=0)
    assert len(result['latency'].times) == 2
    assert all(it.dtype == torch.float32 if dtype == 'fp32' else
               it.dtype == torch.bfloat16 for it in result['rates'])
    (label, stock), = result['comparisons'].items()
    assert label == 'stock mmpretrain'
    # same weights, same math (head size 32: PyTorch's attention kernel on
    # both sides): identical float32 outputs. Under bf16 autocast our GELU
    # and residual adds act on the GEMMs' float32 accumulators (one
    # rounding), stock's on their bf16 outputs: the outputs (|y| <= 3.6
    # after the final LayerNorm) within two bf16 steps at that size.
    if dtype == 'fp32':
        assert stock['max_abs_diff'] == 0.0
    else:
        assert 0 < stock['max_abs_diff'] <= 2**-5
    assert len(stock['latency'].times) == 2
    assert result['peak_mem'] > 0
    assert result['gemm_rate'] > 0 and result['attention_rate'] > 0
    assert result['limit_s']['kernels'] > 0
    assert len(result['round_limit'].times) == 2


def test_stock_backbone_is_mmpretrain_with_the_same_weights():
    from mmpretrain.models.backbones import VisionTransformer
    ours = build_backbone('sapiens_tiny', (64, 48), patch_cfg=dict(padding=2))
    stock = build_stock_backbone(ours)
    assert type(stock) is VisionTransformer
    x = torch.randn(1, 3, 64, 48)
    with torch.no_grad():
        torch.testing.assert_close(stock(x)[0], ours(x)[0], rtol=0, atol=0)
    with pytest.raises(TypeError, match='SapiensVisionTransformer'):
        build_stock_backbone(torch.nn.Linear(2, 2))


class SleepyNorm(torch.nn.LayerNorm):
    """A LayerNorm that sleeps ``seconds`` (its class name ends in Norm)."""

    def __init__(self, seconds: float):
        super().__init__(8)
        self.seconds = seconds

    def forward(self, x):
        time.sleep(self.seconds)
        return super().forward(x)


class SleepyLinear(torch.nn.Linear):

    def __init__(self, seconds: float):
        super().__init__(8, 8)
        self.seconds = seconds

    def forward(self, x):
        time.sleep(self.seconds)
        return super().forward(x)


class KnownSplit(torch.nn.Module):
    """A forward pass of known parts: 80 ms in a linear layer, 40 ms in
    attention (the module's ``scaled_dot_product_attention`` attribute, as
    the Sapiens attention modules have), 30 ms in a norm and 50 ms in
    nothing the breakdown names."""

    def __init__(self):
        super().__init__()
        self.lin = SleepyLinear(0.08)
        self.norm = SleepyNorm(0.03)

        def attention(q, k, v):
            time.sleep(0.04)
            return F.scaled_dot_product_attention(q, k, v)

        self.scaled_dot_product_attention = attention

    def forward(self, x):
        t = self.norm(self.lin(x.flatten(1)[:, :8]))
        q = t.view(1, 1, -1, 8)
        time.sleep(0.05)
        return self.scaled_dot_product_attention(q, q, q)


def test_breakdown_against_known_sleeps():
    """Each part of the timed pass comes out as slept (sleep overshoots by
    a few ms on a loaded machine, never undershoots; upper bounds: the
    sleep plus 60 ms, well below any other part's sleep added to it), and
    the report prints them beside the limit's parts."""
    result = benchmark_model(KnownSplit(), img_size=(16, 16), warmup=0,
                             repeats=1, rate_min_time=0, breakdown=True)
    split = result['breakdown']
    for kind, slept in (('matmul', 0.08), ('attention', 0.04),
                        ('norm', 0.03), ('other', 0.05)):
        assert slept <= split[kind] < slept + 0.06, (kind, split)
    assert split['total'] == pytest.approx(
        sum(split[k] for k in ('matmul', 'attention', 'norm', 'other')))
    text = format_report(result)
    assert 'in the model (one more pass' in text
    (norms, ) = [ln for ln in text.splitlines() if ln.startswith('  norms')]
    assert norms.split() == ['norms', f"{split['norm'] * 1e3:.1f}", 'ms']
    # without the option the result has no breakdown and the report no lines
    plain = benchmark_model(KnownSplit(), img_size=(16, 16), warmup=0,
                            repeats=1, rate_min_time=0)
    assert 'breakdown' not in plain
    assert 'in the model' not in format_report(plain)


def test_breakdown_finds_the_backbone_norms_and_attention():
    """On a real backbone every part is seen: its LayerNorms, its attention
    calls and its linear layers, the model hooks and wrappers restored."""
    model = tiny()
    attn_fn = model.layers[0].attn.scaled_dot_product_attention
    result = benchmark_model(model, img_size=(64, 48), warmup=0, repeats=1,
                             rate_min_time=0, breakdown=True)
    split = result['breakdown']
    assert min(split['matmul'], split['attention'], split['norm']) > 0
    assert split['other'] >= 0
    assert model.layers[0].attn.scaled_dot_product_attention is attn_fn
    assert not model.layers[0].ln1._forward_hooks
    assert not model.layers[0].ln1._forward_pre_hooks


def test_bad_arguments():
    with pytest.raises(ValueError, match='dtype'):
        benchmark_model(tiny(), dtype='int8')
    with pytest.raises(ValueError, match='batch_size'):
        benchmark_model(tiny(), batch_size=0)
    with pytest.raises(ValueError, match='precision'):
        benchmark_model(tiny(), dtype='bf16', precision='half')
    with pytest.raises(SystemExit, match='Unknown --arch'):
        main(['--arch', 'sapiens_9b'])
    with pytest.raises(SystemExit, match='--checkpoint goes with --config'):
        main(['--arch', 'sapiens_tiny', '--checkpoint', 'x.pth'])
    with pytest.raises(SystemExit, match='--e2e-only needs --end-to-end'):
        main(['--arch', 'sapiens_tiny', '--e2e-only'])
    with pytest.raises(ValueError, match='breakdown times each call'):
        benchmark_model(tiny(), compile=True, breakdown=True)
    with pytest.raises(SystemExit, match='--breakdown times each call'):
        main(['--arch', 'sapiens_tiny', '--breakdown', '--compile'])


def test_old_import_path_warns_and_gives_the_same_functions():
    sys.modules.pop('sapiens_mm.apis.benchmark', None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        old = importlib.import_module('sapiens_mm.apis.benchmark')
    assert any(issubclass(w.category, DeprecationWarning)
               and 'sapiens_mm.analysis' in str(w.message) for w in caught)
    assert old.benchmark_model is benchmark_model
    assert old.DTYPES == dict(fp32=torch.float32, bf16=torch.bfloat16,
                              fp16=torch.float16)


# -------------------------------------------------------- end to end
def _folder(tmp_path, n=3):
    folder = tmp_path / 'imgs'
    folder.mkdir()
    for i in range(n):
        cv2.imwrite(str(folder / f'{i}.png'), image(70, 50, i))
    return folder


def _slow_test_step(model, seconds):
    """Make ``model.test_step`` (the task inferencers' model step) take
    ``seconds`` longer."""
    real = model.test_step

    def test_step(data):
        time.sleep(seconds)
        return real(data)
    model.test_step = test_step


def test_end_to_end_against_a_known_model_time(tmp_path):
    """The seg model's step sleeps 0.3 s. 3 frames at batch 2 are 1.5
    batches of model-only work: 0.45 s plus the tiny model's compute; the
    whole run makes 2 model steps, so it takes at least 0.6 s. Upper
    bounds: twice the sleeps (a pass counted twice would reach them)."""
    folder = _folder(tmp_path)
    inferencer = SapiensInferencer(dict(seg=small_cfg('seg')), device='cpu')
    _slow_test_step(inferencer.task_inferencers['seg'].model, 0.3)
    out = tmp_path / 'out'
    result = end_to_end(inferencer, str(folder), str(out), batch_size=2,
                        repeats=2)
    assert result['images'] == 3
    assert sorted(p.name for p in (out / 'seg').glob('*.npy')) == [
        '0.npy', '1.npy', '2.npy']
    assert len(result['e2e'].times) == len(result['model_latency'].times) \
        == 2
    assert 0.3 <= result['model_batch_s']['dense'] < 0.6
    assert 0.45 <= result['model_s'] < 0.9
    assert result['e2e'].min >= 0.6
    assert result['ratio'] < 1
    (tmp_path / 'empty').mkdir()
    with pytest.raises(ValueError, match='No image'):
        end_to_end(inferencer, str(tmp_path / 'empty'), str(out))


def test_end_to_end_pose_and_seg_on_a_video(tmp_path):
    """Pose (given boxes: 2 people per frame) and seg on a generated video,
    batch 2; the pose step sleeps 0.3 s per call, the seg step 0.1 s. The
    sample batch (the first 2 frames) has 4 crops: 2 pose steps (0.6 s) and
    one seg step (0.1 s). The run's 3 frames are 1.5 seg batches and its 6
    people 1.5 samples' worth of pose: 1.05 s plus compute. The pose step's
    upper bound: twice its sleeps (a pass counted twice would reach it)."""
    from sapiens_mm.datasets.synthetic.video import write_video
    info = write_video(tmp_path / 'people.mp4', num_frames=3, size=(96, 128),
                       min_people=2, max_people=2, unique_frames=1)
    boxes = info['boxes'][0]
    assert len(boxes) == 2
    inferencer = SapiensInferencer(
        dict(pose=small_cfg('pose'), seg=small_cfg('seg')), device='cpu')
    _slow_test_step(inferencer.task_inferencers['pose'].model, 0.3)
    _slow_test_step(inferencer.task_inferencers['seg'].model, 0.1)
    out = tmp_path / 'out'
    result = end_to_end(inferencer, info['path'], str(out), batch_size=2,
                        repeats=1, bboxes=boxes)
    assert result['images'] == 3 and result['tasks'] == ['seg', 'pose']
    assert result['crops_per_image'] == 2
    for i in range(3):
        pose = json.loads((out / 'pose' / 'people' /
                           f'{i:06d}.json').read_text())
        assert len(pose['instances']) == 2
        assert (out / 'seg' / 'people' / f'{i:06d}.npy').exists()
    per = result['model_batch_s']
    assert per['crops'] == 4
    assert 0.6 <= per['pose'] < 1.2
    assert 0.1 <= per['dense']
    assert result['model_s'] == pytest.approx(1.5 * per['dense'] +
                                              1.5 * per['pose'])
    assert 1.05 <= result['model_s']
    # the run: 3 pose steps (4 + 2 crops) and 2 seg steps
    assert result['e2e'].min >= 1.1


# ---------------------------------------------------------------- CLI
def test_cli_reports_and_writes_json(tmp_path):
    """The report lines go to ``echo`` (printed by default; the library
    itself prints nothing)."""
    path = tmp_path / 'r.json'
    lines = []
    main([
        '--config', str(TINY['seg']), '--img-size', '64', '48', '--warmup',
        '0', '--repeats', '1', '--compare-stock', '--json', str(path),
        '--device', 'cpu'
    ], echo=lines.append)
    out = '\n'.join(lines)
    for text in ('images/s', 'latency (per batch) median', 'peak memory',
                 'GEMM rate', 'attention kernel', 'limit',
                 'achieved/limit', '(fastest runs)', 'stock mmpretrain',
                 'speed ratio', 'max abs output difference 0'):
        assert text in out, text
    data = json.loads(path.read_text())
    model_only = data['model_only']
    assert model_only['achieved_over_limit'] > 0
    stock = model_only['comparisons']['stock mmpretrain']
    assert math.isclose(stock['max_abs_diff'], 0.0)
    assert {r['kind'] for r in model_only['rates']} == {'matmul', 'attention'}


def test_help_lists_the_options():
    text = benchmark_tool.build_parser('benchmark.py').format_help()
    for flag in ('--arch', '--config', '--checkpoint', '--img-size',
                 '--batch-size', '--dtype', '--autocast', '--device',
                 '--threads', '--warmup', '--repeats', '--compile',
                 '--compare-stock', '--compare-transformers',
                 '--peak-tflops', '--end-to-end',
                 '--e2e-config', '--e2e-only', '--e2e-images', '--out-dir',
                 '--layers', '--json', '--compile-mode', '--sdpa-backend',
                 '--cuda-graph', '--channels-last', '--e2e-boxes',
                 '--e2e-cfg-options', '--e2e-det-interval', '--breakdown',
                 '--compare-routes', '--compare-runtimes', '--system-malloc'):
        assert flag in text, flag


def test_e2e_cli_pose_and_seg_with_boxes_and_cfg_options(tmp_path,
                                                        monkeypatch):
    """--e2e-config takes several configs, --e2e-cfg-options reaches the
    configs that have the key (flip test of pose only), --e2e-boxes the
    stream, --e2e-det-interval the inferencer."""
    from sapiens_mm.datasets.synthetic.video import write_video
    info = write_video(tmp_path / 'v.mp4', num_frames=2, size=(96, 128),
                       min_people=2, max_people=2, unique_frames=1)
    boxes = tmp_path / 'boxes.json'
    boxes.write_text(json.dumps(info['boxes'][0].tolist()))
    import sapiens_mm.apis.inferencers as inferencers
    real = inferencers.SapiensInferencer
    built = []

    def build(models, **kwargs):
        built.append(real(models, **kwargs))
        return built[-1]

    monkeypatch.setattr(inferencers, 'SapiensInferencer', build)
    path = tmp_path / 'r.json'
    lines = []
    main(['--arch', 'sapiens_tiny', '--e2e-only', '--end-to-end',
          info['path'], '--e2e-config', str(TINY['pose']), str(TINY['seg']),
          '--e2e-cfg-options', 'model.test_cfg.flip_test=False',
          '--e2e-boxes', str(boxes), '--repeats', '1', '--device', 'cpu',
          '--e2e-det-interval', '3', '--json', str(path)], echo=lines.append)
    (inferencer, ) = built
    assert inferencer.det_interval == 3
    assert inferencer.task_inferencers['pose'].model.test_cfg[
        'flip_test'] is False
    assert 'flip_test' not in (
        inferencer.task_inferencers['seg'].model.test_cfg or {})
    e2e = json.loads(path.read_text())['end_to_end']
    assert e2e['images'] == 2 and e2e['crops_per_image'] == 2
    assert 'people per image    2.00' in '\n'.join(lines)
    with pytest.raises(SystemExit, match='no --e2e-config has model.nope'):
        main(['--arch', 'sapiens_tiny', '--e2e-only', '--end-to-end',
              info['path'], '--e2e-config', str(TINY['seg']),
              '--e2e-cfg-options', 'model.nope=1', '--device', 'cpu'])
    boxes.write_text('[1, 2]')
    with pytest.raises(SystemExit, match='e2e-boxes'):
        main(['--arch', 'sapiens_tiny', '--e2e-only', '--end-to-end',
              info['path'], '--e2e-boxes', str(boxes), '--device', 'cpu'])


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
    (label, stock), = result['comparisons'].items()
    assert label == 'plain reference'
    assert len(stock['latency'].times) == 2
    assert result['limit_s']['attention'] > 0
    assert 0 < result['achieved_over_limit']
    # fp32: two implementations' float rounding; bf16 (weights cast):
    # bf16 rounding in every op of 2 blocks, outputs of size ~3.
    tol = 1e-4 if dtype == 'fp32' else 0.25
    assert stock['max_abs_diff'] < tol


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
    assert list(result['comparisons']) == ['plain reference']
    with pytest.raises(SystemExit, match='sapiens2_0.4b'):
        main(['--arch', 'sapiens2_2b'])
