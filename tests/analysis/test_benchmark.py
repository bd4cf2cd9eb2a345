"""The benchmark tool: FLOP counts, kernel-rate limit, timing statistics,
peak memory, stock comparison, end-to-end timing and the CLI.

Tiny arch at small inputs; the whole file takes about 15 s on a busy
2-core machine.
"""
import json
import math

import cv2
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from inference_helpers import image, small_cfg
from tiny_configs import TINY
from tool_helpers import load_tool
from torch.utils.flop_counter import FlopCounterMode

from sapiens_mm.apis import SapiensInferencer, init_model
from sapiens_mm.apis.benchmark import (
    PeakMemory,
    TimingStats,
    Work,
    benchmark_model,
    build_backbone,
    build_stock_backbone,
    count_work,
    end_to_end,
    limit_seconds,
    measure_rates,
)

benchmark_tool = load_tool('analysis/benchmark')
main = benchmark_tool.main

C, FFN, LAYERS, HEADS = 64, 128, 2, 2  # sapiens_tiny


def tiny(hw=(64, 48)):
    torch.manual_seed(0)
    return build_backbone('sapiens_tiny', hw)


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


def test_attention_is_pytorch_sdpa_and_is_what_gets_timed():
    model = tiny()
    for layer in model.layers:
        assert layer.attn.scaled_dot_product_attention is \
            F.scaled_dot_product_attention
    x = torch.randn(1, 3, 64, 48)
    work = count_work(model, lambda: model(x))
    fns = set(work.attention_fns.values())
    assert fns == {F.scaled_dot_product_attention}
    # the wrappers are removed again
    assert model.layers[0].attn.scaled_dot_product_attention is \
        F.scaled_dot_product_attention
    (item, ) = [it for it in work.items if it.kind == 'attention']
    # q, k, v are views of one qkv output: one shared storage
    assert [spec[-1] for spec in item.shape] == [0, 0, 0]


def test_rates_rebuild_shared_qkv_views_and_limit_sums_flops_over_rates():
    seen = []

    def attn(q, k, v):
        seen.append((q.untyped_storage().data_ptr() ==
                     k.untyped_storage().data_ptr(), q.stride()))
        return F.scaled_dot_product_attention(q, k, v)

    qkv = torch.randn(1, 12, 3, 2, 32).permute(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    work = Work()

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
    assert all(shared and stride == q.stride() for shared, stride in seen)
    assert set(rates) == set(work.items)
    fixed = {it: (1e9 if it.kind == 'matmul' else 5e8) for it in work.items}
    mm_flops, att_flops = 2 * 10 * 64 * 32, 2 * 2 * 12 * 12 * (32 + 32)
    assert work.flops('matmul') == mm_flops
    assert work.flops('attention') == att_flops
    assert limit_seconds(work, fixed) == pytest.approx(mm_flops / 1e9 +
                                                       att_flops / 5e8)
    assert limit_seconds(work, fixed, 'attention') == pytest.approx(
        att_flops / 5e8)


def test_timing_stats():
    s = TimingStats([5.0, 1.0, 4.0, 2.0, 3.0])
    assert (s.median, s.min, s.max) == (3.0, 1.0, 5.0)
    assert s.iqr == pytest.approx(2.0)  # quartiles 2 and 4
    assert TimingStats([7.0]).iqr == 0.0


def test_peak_memory_sees_a_temporary_allocation():
    with PeakMemory(torch.device('cpu')) as mem:
        buf = np.ones(64 * 2**20, np.uint8)  # 64 MiB, touched
        del buf
    if not mem.exact:
        pytest.skip('no resettable VmHWM on this system')
    assert mem.peak - mem.base >= 60 * 2**20


@pytest.mark.parametrize('dtype,precision', [('fp32', 'cast'),
                                             ('bf16', 'autocast')])
def test_benchmark_and_stock_comparison(dtype, precision):
    result = benchmark_model(
        tiny(), batch_size=2, img_size=(64, 48), dtype=dtype,
        precision=precision, warmup=0, repeats=2, compare_stock=True,
        rate_min_time=0)
    lat = result['latency']
    assert len(lat.times) == 2
    assert result['images_per_s'] == pytest.approx(2 / lat.median)
    assert result['gflops_per_s'] == pytest.approx(
        result['flops']['total'] / lat.median / 1e9)
    assert result['achieved_over_limit'] == pytest.approx(
        result['limit_s']['total'] / lat.median)
    assert result['limit_s']['total'] == pytest.approx(
        result['limit_s']['matmul'] + result['limit_s']['attention'])
    assert all(it.dtype == torch.float32 if dtype == 'fp32' else
               it.dtype == torch.bfloat16 for it in result['rates'])
    # same weights, same math: identical outputs
    assert result['stock_max_abs_diff'] == 0.0
    assert result['stock_speedup'] == pytest.approx(
        result['stock_latency'].median / lat.median)
    assert result['peak_mem'] > 0


def test_models_alternate_going_first(monkeypatch):
    """Each round times both models; which goes first alternates, so
    neither always runs right after the kernel timings (on an H200 the model
    timed first ran ~6 % slower)."""
    import sapiens_mm.apis.benchmark as bench
    calls = []
    real = bench.time_callable

    def spy(fn, *args, **kwargs):
        calls.append(fn.__name__)
        return real(fn, *args, **kwargs)

    monkeypatch.setattr(bench, 'time_callable', spy)
    result = benchmark_model(
        tiny(), batch_size=1, img_size=(64, 48), warmup=0, repeats=4,
        compare_stock=True, rate_min_time=0)
    models = [c.replace('run_and_keep', 'run') for c in calls
              if c in ('run', 'run_and_keep', 'stock_run')]
    assert models == ['run', 'stock_run', 'stock_run', 'run'] * 2
    assert len(result['latency'].times) == 4
    assert len(result['stock_latency'].times) == 4


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


def _folder(tmp_path, n=3):
    folder = tmp_path / 'imgs'
    folder.mkdir()
    for i in range(n):
        cv2.imwrite(str(folder / f'{i}.png'), image(70, 50, i))
    return folder


def test_end_to_end(tmp_path):
    folder = _folder(tmp_path)
    inferencer = SapiensInferencer(dict(seg=small_cfg('seg')), device='cpu')
    out = tmp_path / 'out'
    result = end_to_end(inferencer, str(folder), str(out), batch_size=2,
                        repeats=2)
    assert result['images'] == 3
    assert sorted(p.name for p in (out / 'seg').glob('*.npy')) == [
        '0.npy', '1.npy', '2.npy']
    assert result['e2e_images_per_s'] == pytest.approx(3 / result['e2e_s'])
    assert result['ratio'] == pytest.approx(
        result['e2e_images_per_s'] / result['model_images_per_s'])
    (tmp_path / 'empty').mkdir()
    with pytest.raises(ValueError, match='No image'):
        end_to_end(inferencer, str(tmp_path / 'empty'), str(out))


def test_end_to_end_pose_and_seg_on_a_video(tmp_path):
    """Pose (given boxes: 2 people per frame) and seg on a generated video;
    the model-only time counts one dense pass per batch of frames and one
    pose pass per batch of crops."""
    from sapiens_mm.datasets.synthetic.video import write_video
    info = write_video(tmp_path / 'people.mp4', num_frames=3, size=(96, 128),
                       min_people=2, max_people=2, unique_frames=1)
    boxes = info['boxes'][0]
    assert len(boxes) == 2
    inferencer = SapiensInferencer(
        dict(pose=small_cfg('pose'), seg=small_cfg('seg')), device='cpu')
    out = tmp_path / 'out'
    result = end_to_end(inferencer, info['path'], str(out), batch_size=2,
                        repeats=2, bboxes=boxes)
    assert result['images'] == 3 and result['tasks'] == ['seg', 'pose']
    assert result['crops_per_image'] == 2
    for i in range(3):
        pose = json.loads((out / 'pose' / 'people' /
                           f'{i:06d}.json').read_text())
        assert len(pose['instances']) == 2
        assert (out / 'seg' / 'people' / f'{i:06d}.npy').exists()
    per = result['model_batch_s']
    assert per['crops'] == 4  # the first 2 frames, 2 people each
    # 3 frames = 1.5 dense batches; 6 crops = 1.5 times the 4 sample crops
    assert result['model_s'] == pytest.approx(1.5 * per['dense'] +
                                              1.5 * per['pose'])
    assert result['model_images_per_s'] == pytest.approx(
        3 / result['model_s'])
    assert result['ratio'] == pytest.approx(
        result['e2e_images_per_s'] / result['model_images_per_s'])


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
                 'GFLOP/s', 'limit', 'achieved/limit', 'stock mmpretrain',
                 'speed ratio', 'max abs output difference 0'):
        assert text in out, text
    data = json.loads(path.read_text())
    model_only = data['model_only']
    assert model_only['achieved_over_limit'] > 0
    assert math.isclose(model_only['stock_max_abs_diff'], 0.0)
    assert {r['kind'] for r in model_only['rates']} == {'matmul', 'attention'}


def test_help_lists_the_options():
    text = benchmark_tool.build_parser('benchmark.py').format_help()
    for flag in ('--arch', '--config', '--checkpoint', '--img-size',
                 '--batch-size', '--dtype', '--autocast', '--device',
                 '--threads', '--warmup', '--repeats', '--compile',
                 '--compare-stock', '--peak-tflops', '--end-to-end',
                 '--e2e-config', '--e2e-only', '--e2e-images', '--out-dir',
                 '--layers', '--json', '--compile-mode', '--sdpa-backend',
                 '--cuda-graph', '--channels-last', '--e2e-boxes',
                 '--e2e-cfg-options', '--e2e-det-interval'):
        assert flag in text, flag


def test_e2e_cli_pose_and_seg_with_boxes_and_cfg_options(tmp_path,
                                                        monkeypatch):
    """--e2e-config takes several configs, --e2e-cfg-options reaches the
    configs that have the key (flip test of pose only), --e2e-boxes the
    stream."""
    from sapiens_mm.datasets.synthetic.video import write_video
    info = write_video(tmp_path / 'v.mp4', num_frames=2, size=(96, 128),
                       min_people=2, max_people=2, unique_frames=1)
    boxes = tmp_path / 'boxes.json'
    boxes.write_text(json.dumps(info['boxes'][0].tolist()))
    built = []
    import sapiens_mm.apis.inferencers as inferencers
    real = inferencers.SapiensInferencer

    def spy(models, **kwargs):
        built.append(models)
        return real(models, **kwargs)

    monkeypatch.setattr(inferencers, 'SapiensInferencer', spy)
    kwargs_seen = []
    real_init = real.__init__

    def init(self, *args, **kwargs):
        kwargs_seen.append(kwargs)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(real, '__init__', init)
    path = tmp_path / 'r.json'
    lines = []
    main(['--arch', 'sapiens_tiny', '--e2e-only', '--end-to-end',
          info['path'], '--e2e-config', str(TINY['pose']), str(TINY['seg']),
          '--e2e-cfg-options', 'model.test_cfg.flip_test=False',
          '--e2e-boxes', str(boxes), '--repeats', '1', '--device', 'cpu',
          '--e2e-det-interval', '3', '--json', str(path)], echo=lines.append)
    assert kwargs_seen[0]['det_interval'] == 3
    pose_cfg, seg_cfg = built[0]
    assert pose_cfg.model.test_cfg.flip_test is False
    assert 'flip_test' not in seg_cfg.model.test_cfg
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
