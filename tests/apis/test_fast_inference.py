"""Fast inference paths against fp32 eager: bf16 (cast and autocast),
torch.compile, and the inferencer's overlapped pre- / post-processing.

Stated tolerances (tiny arch, 64x48 input, random weights):

- bf16 (weights and activations cast, or autocast) vs fp32 eager backbone
  features: max abs difference <= 2.5 % of max |fp32| and mean abs
  difference <= 1.5 % of mean |fp32| (bf16 keeps 8 significant bits: one
  rounding is up to 0.4 %);
- compiled vs eager, fp32: max abs difference <= 1e-4 (float reordering).

Time: about 45 s on a busy 2-core machine, nearly all of it the C++
compilation of ``test_compiled_inferencer_matches_eager`` (less with a warm
inductor cache); the rest takes about 5 s.
"""
import copy
import threading
import time

import cv2
import numpy as np
import pytest
import torch
from inference_helpers import image, small_cfg

from sapiens_mm.apis import SapiensInferencer
from sapiens_mm.apis.benchmark import build_backbone

BF16_MAX_REL, BF16_MEAN_REL = 0.025, 0.015


def _check_bf16(out, ref):
    diff = (out.float() - ref).abs()
    assert diff.max() <= BF16_MAX_REL * ref.abs().max(), diff.max()
    assert diff.mean() <= BF16_MEAN_REL * ref.abs().mean(), diff.mean()


@pytest.mark.parametrize('arch', [
    'sapiens_tiny',
    dict(embed_dims=128, num_layers=4, num_heads=4, feedforward_channels=512)
])
def test_bf16_backbone_matches_fp32(arch):
    torch.manual_seed(0)
    model = build_backbone(arch, (64, 48))
    x = torch.randn(2, 3, 64, 48)
    with torch.inference_mode():
        ref = model(x)[0]
        cast = copy.deepcopy(model).to(torch.bfloat16)
        out_cast = cast(x.bfloat16())[0]
        with torch.autocast('cpu', dtype=torch.bfloat16):
            out_auto = model(x)[0]
    assert out_cast.dtype == torch.bfloat16
    _check_bf16(out_cast, ref)
    _check_bf16(out_auto, ref)
    # and the check can fail: a 5 % perturbation does not pass
    with pytest.raises(AssertionError):
        _check_bf16(ref * 1.05, ref)


@pytest.mark.slow
def test_compiled_inferencer_matches_eager(tmp_path):
    """``compile=True`` compiles the backbone in place (state-dict keys
    unchanged) and gives the eager outputs (takes ~40 s: compilation)."""
    cfgs = dict(depth=small_cfg('depth'))
    torch.manual_seed(0)
    eager = SapiensInferencer(cfgs, device='cpu')
    compiled = SapiensInferencer(cfgs, device='cpu', compile=True)
    compiled.models['depth'].load_state_dict(
        eager.models['depth'].state_dict())
    assert 'backbone.pos_embed' in compiled.models['depth'].state_dict()
    imgs = [image(64, 48, 1), image(64, 48, 2)]
    a = eager(imgs, batch_size=2, show_progress=False)
    b = compiled(imgs, batch_size=2, show_progress=False)
    for ra, rb in zip(a, b):
        np.testing.assert_allclose(rb['predictions']['depth'],
                                   ra['predictions']['depth'], atol=1e-4)


@pytest.fixture(scope='module')
def seg():
    torch.manual_seed(0)
    return SapiensInferencer(dict(seg=small_cfg('seg')), device='cpu')


def _write_folder(tmp_path, n):
    folder = tmp_path / 'imgs'
    folder.mkdir()
    for i in range(n):
        cv2.imwrite(str(folder / f'{i:02d}.png'), image(70, 50, i))
    return folder


def test_stream_is_ordered_and_files_exist_when_yielded(seg, tmp_path):
    folder = _write_folder(tmp_path, 5)
    out = tmp_path / 'out'
    names = []
    for result in seg.stream(str(folder), out_dir=str(out), batch_size=2,
                             show_progress=False):
        names.append(result['name'])
        assert (out / 'seg' / f"{result['name']}.npy").is_file()
        assert (out / 'seg' / f"{result['name']}.png").is_file()
    assert names == [f'{i:02d}' for i in range(5)]
    # the same predictions as one image at a time, without overlap
    for i, name in enumerate(names):
        one = seg(image(70, 50, i), show_progress=False)[0]
        np.testing.assert_array_equal(
            np.load(out / 'seg' / f'{name}.npy'), one['predictions']['seg'])


def test_next_batch_is_prepared_while_the_model_runs(seg, monkeypatch):
    """Pre-processing of batch 2 starts before the model finishes batch 1
    (no timing involved: batch 1's model waits for that event)."""
    prepared_2 = threading.Event()
    calls = []
    prepare, run = seg.preprocess, seg.forward

    def counting_prepare(batch, boxes):
        calls.append(('prepare', threading.current_thread().name))
        out = prepare(batch, boxes)
        if sum(kind == 'prepare' for kind, _ in calls) == 2:
            prepared_2.set()
        return out

    def waiting_run(prepared, batch_size):
        calls.append(('run', threading.current_thread().name))
        if sum(kind == 'run' for kind, _ in calls) == 1:
            # sequential code would deadlock here (until the timeout)
            assert prepared_2.wait(10), 'batch 2 was not prepared meanwhile'
        return run(prepared, batch_size)

    monkeypatch.setattr(seg, 'preprocess', counting_prepare)
    monkeypatch.setattr(seg, 'forward', waiting_run)
    results = seg([image(64, 48, i) for i in range(4)], batch_size=2,
                  show_progress=False)
    assert len(results) == 4
    assert prepared_2.is_set()
    assert {t for kind, t in calls if kind == 'prepare'} == {
        'sapiens-prefetch'}
    assert {t for kind, t in calls if kind == 'run'} == {
        threading.main_thread().name}


def test_worker_errors_reach_the_caller_and_threads_stop(seg, monkeypatch):
    before = threading.active_count()
    prepare = seg.preprocess
    count = [0]

    def failing(batch, boxes):
        count[0] += 1
        if count[0] == 2:
            raise RuntimeError('pipeline failed on batch 2')
        return prepare(batch, boxes)

    monkeypatch.setattr(seg, 'preprocess', failing)
    imgs = [image(64, 48, i) for i in range(4)]
    with pytest.raises(RuntimeError, match='batch 2'):
        seg(imgs, batch_size=2, show_progress=False)
    monkeypatch.undo()

    def bad_write(*args, **kwargs):
        raise OSError('disk full')

    monkeypatch.setattr(seg, 'postprocess', bad_write)
    with pytest.raises(OSError, match='disk full'):
        seg(imgs, batch_size=1, show_progress=False)
    monkeypatch.undo()
    # stopping early ends the workers too
    stream = seg.stream(imgs, batch_size=1, show_progress=False)
    next(stream)
    stream.close()
    deadline = time.time() + 5
    while threading.active_count() > before and time.time() < deadline:
        time.sleep(0.05)
    assert threading.active_count() == before


def test_inference_gelu_is_in_place_only_without_gradients():
    from sapiens_mm.models.backbones.sapiens_vision_transformer import _InferenceGELU
    torch.manual_seed(0)
    model = build_backbone('sapiens_tiny', (64, 48))
    gelus = [m for m in model.modules() if isinstance(m, torch.nn.GELU)]
    assert len(gelus) == 2 and all(
        type(m) is _InferenceGELU for m in gelus)
    x = torch.randn(3, 5)
    with torch.no_grad():
        y = x.clone()
        out = gelus[0](y)
    assert out.data_ptr() == y.data_ptr()  # overwritten in place
    torch.testing.assert_close(out, torch.nn.functional.gelu(x))
    xg = x.clone().requires_grad_()
    out = gelus[0](xg)
    assert out.data_ptr() != xg.data_ptr()
    torch.testing.assert_close(out, torch.nn.functional.gelu(x))
    # training forward / backward still match a stock GELU model
    img = torch.randn(1, 3, 64, 48)
    model.train()
    model(img)[0].sum().backward()
    assert all(p.grad is not None for p in model.parameters()
               if p.requires_grad)


def test_residual_stream_is_row_major():
    """Every encoder layer gets a row-major (B, L, C) token tensor.

    PatchEmbed returns a transposed view; kept, that layout would run every
    residual add as a strided kernel (on an H200 at sapiens_0.3b, batch 8:
    ~16 of 62 ms). The output is unchanged.
    """
    model = build_backbone('sapiens_tiny', (64, 48)).eval()
    seen = []
    for layer in model.layers:
        layer.register_forward_pre_hook(
            lambda m, args: seen.append(args[0].is_contiguous()))
    x = torch.randn(2, 3, 64, 48)
    with torch.no_grad():
        out = model(x)[0]
    assert seen == [True, True]
    # the same numbers as the transposed layout (mmpretrain's own forward)
    from sapiens_mm.apis.benchmark import build_stock_backbone
    with torch.no_grad():
        ref = build_stock_backbone(model)(x)[0]
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('padding', [0, 2])
@pytest.mark.parametrize('dtype', [torch.bfloat16, torch.float16])
def test_reduced_precision_patch_embedding_is_the_convolution(padding, dtype):
    """On CPU the bf16 / fp16 patch embedding runs as one GEMM over
    non-overlapping patches: the convolution's numbers (float64 reference,
    partial edge patches dropped as Conv2d does) at the rounding error of
    the dtype's own convolution, and its state dict."""
    from sapiens_mm.models.layers import PatchConv2d
    backbone = build_backbone('sapiens_tiny', (64, 48),
                              patch_cfg=dict(padding=padding))
    proj = backbone.patch_embed.projection
    assert type(proj) is PatchConv2d
    assert set(proj.state_dict()) == {'weight', 'bias'}
    x = torch.randn(2, 3, 70, 53)  # 16 px patches do not tile it
    ref = torch.nn.functional.conv2d(x.double(), proj.weight.double(),
                                     proj.bias.double(), stride=16,
                                     padding=padding)
    # fp32 keeps the convolution itself
    torch.testing.assert_close(proj(x), torch.nn.Conv2d.forward(proj, x),
                               rtol=0, atol=0)
    low = copy.deepcopy(proj).to(dtype)
    out = low(x.to(dtype))
    conv = torch.nn.Conv2d.forward(low, x.to(dtype))
    assert out.shape == ref.shape == conv.shape
    err = (out.double() - ref).abs().max().item()
    conv_err = (conv.double() - ref).abs().max().item()
    assert err <= 2 * conv_err + 1e-3, (err, conv_err)
    assert err < 0.02 * ref.abs().max().item()
