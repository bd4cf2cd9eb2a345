"""The inference form of linear layers (pack_cpu_linears, as
sapiens_mm.apis.optimize_for_inference applies it) never computes with
weights other than the model's current ones: each way of writing a weight
either reaches the packed weight or raises PackedWeightError, and the
supported way (load_state_dict, or converting back, writing, packing again)
gives the outputs of a fresh model built with the intended state dict.

The intended state dict is computed on plain tensors (a copy of the state
before the write, changed the same way), never read back from the packed
model. The models are the tiny Sapiens (mmcv Linear, fused GELU FFN) and
Sapiens2 (nn.Linear, SwiGLU halves, LayerScale) backbones with random
weights of scale 0.3, whose outputs are of order 1 (final norm).

Tolerance: a float32 packed GEMM sums in oneDNN's blocking instead of MKL's
(measured: outputs within 1e-5 of each other here); every write changes the
output by at least 0.05 (asserted), so a stale weight cannot pass.
"""
import copy
import pickle

import pytest
import torch
import torch.nn as nn

from sapiens_mm.models.backbones import (Sapiens2VisionTransformer,
                                         SapiensVisionTransformer)
from sapiens_mm.utils.cpu_features import packed_linear_supported
from sapiens_mm.utils.cpu_linear import (PackedCpuLinear, PackedParameter,
                                         PackedWeightError, pack_cpu_linears,
                                         packed_weight_bytes,
                                         unpack_cpu_linears)

pytestmark = pytest.mark.skipif(
    not packed_linear_supported(torch.float32),
    reason="needs oneDNN's packed float32 linear layer")

ARCHS = ['sapiens_tiny', 'sapiens2_tiny']
TOL = dict(rtol=0, atol=2e-5)
MIN_CHANGE = 0.05


def _build(arch):
    if arch.startswith('sapiens2'):
        model = Sapiens2VisionTransformer(arch, img_size=(64, 48),
                                          out_type='featmap')
    else:
        model = SapiensVisionTransformer(arch, img_size=(64, 48),
                                         out_type='featmap')
    return model.eval()


def _random_state(arch, seed=0):
    """A state dict of ``arch`` with every parameter random (scale 0.3)."""
    gen = torch.Generator().manual_seed(seed)
    model = _build(arch)
    state = model.state_dict()
    for name, _ in model.named_parameters():
        state[name] = torch.randn(state[name].shape, generator=gen) * 0.3
    return state


def _fresh(arch, state):
    """The reference: a plain model built with ``state``."""
    model = _build(arch)
    model.load_state_dict(state)
    return model


def _run(model, x):
    with torch.inference_mode():
        return model(x)[0]


def _packed_model(arch, state):
    model = _fresh(arch, state)
    assert pack_cpu_linears(model) > 0
    return model


def _ffn_layer(model):
    """A linear layer of the first block's FFN and its state-dict key."""
    if isinstance(model, Sapiens2VisionTransformer):
        return model.blocks[0].ffn.w3, 'blocks.0.ffn.w3.weight'
    return model.layers[0].ffn.layers[1], 'layers.0.ffn.layers.1.weight'


@pytest.fixture(scope='module')
def image():
    return torch.randn(2, 3, 64, 48, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize('arch', ARCHS)
def test_packed_model_computes_what_the_plain_one_does(arch, image):
    state = _random_state(arch)
    plain = _fresh(arch, state)
    model = _packed_model(arch, state)
    assert all(type(m) is not nn.Linear for m in model.modules())
    torch.testing.assert_close(_run(model, image), _run(plain, image), **TOL)


@pytest.mark.parametrize('arch', ARCHS)
def test_data_write_raises_and_reaches_the_plain_form(arch, image):
    """A ``.data`` write (how EMAHook swaps and PEFT merges write) cannot
    reach a packed weight: it raises, and the model still computes with
    its current weights. Converted back, the same write is seen."""
    state = _random_state(arch)
    model = _packed_model(arch, state)
    before = _run(model, image)
    layer, key = _ffn_layer(model)
    delta = torch.randn(state[key].shape) * 0.3
    with pytest.raises(PackedWeightError, match=r'\.data.*load_state_dict'):
        layer.weight.data += delta
    with pytest.raises(PackedWeightError):
        layer.weight.data = state[key] + delta
    with pytest.raises(PackedWeightError, match='Assigning weight'):
        layer.weight = nn.Parameter(state[key] + delta)
    torch.testing.assert_close(_run(model, image), before, rtol=0, atol=0)
    torch.testing.assert_close(before, _run(_fresh(arch, state), image),
                               **TOL)
    # converted back: the write is seen, packed again it is used
    assert unpack_cpu_linears(model) > 0
    layer.weight.data += delta
    pack_cpu_linears(model)
    want = dict(state)
    want[key] = state[key] + delta
    after = _run(model, image)
    torch.testing.assert_close(after, _run(_fresh(arch, want), image), **TOL)
    assert float((after - before).abs().max()) > MIN_CHANGE


@pytest.mark.parametrize('arch', ARCHS)
def test_copy_under_no_grad_raises(arch, image):
    state = _random_state(arch)
    model = _packed_model(arch, state)
    layer, key = _ffn_layer(model)
    new = torch.randn(state[key].shape)
    with torch.no_grad(), pytest.raises(PackedWeightError, match='copy_'):
        layer.weight.copy_(new)
    torch.testing.assert_close(_run(model, image),
                               _run(_fresh(arch, state), image), **TOL)
    model.train()  # the plain form again, in training mode
    with torch.no_grad():
        layer.weight.copy_(new)
    pack_cpu_linears(model.eval())
    want = dict(state, **{key: new})
    torch.testing.assert_close(_run(model, image),
                               _run(_fresh(arch, want), image), **TOL)


@pytest.mark.parametrize('arch', ARCHS)
def test_load_state_dict_repacks(arch, image):
    first, second = _random_state(arch, 0), _random_state(arch, 1)
    model = _packed_model(arch, first)
    before = _run(model, image)
    model.load_state_dict(second)
    assert all(not isinstance(m, nn.Linear) or isinstance(m, PackedCpuLinear)
               for m in model.modules())
    got = _run(model, image)
    torch.testing.assert_close(got, _run(_fresh(arch, second), image), **TOL)
    assert float((got - before).abs().max()) > MIN_CHANGE
    # the state dict reads back what was loaded, in the same key order
    out = model.state_dict()
    assert list(out) == list(second)
    for key, value in second.items():
        assert torch.equal(out[key], value), key


@pytest.mark.parametrize('arch', ARCHS)
def test_load_state_dict_errors_name_the_weight(arch):
    state = _random_state(arch)
    model = _packed_model(arch, state)
    _, key = _ffn_layer(model)
    missing = {k: v for k, v in state.items() if k != key}
    with pytest.raises(RuntimeError, match=rf'Missing key.*{key}'):
        model.load_state_dict(missing)
    wrong = dict(state, **{key: state[key][:, :-1]})
    with pytest.raises(RuntimeError, match=rf'size mismatch for {key}'):
        model.load_state_dict(wrong)
    with pytest.raises(RuntimeError, match='Unexpected key.*extra'):
        model.load_state_dict(dict(state, extra=torch.zeros(1)))
    # non-strict loading leaves the missing weight as it was
    model.load_state_dict(missing, strict=False)
    assert torch.equal(model.state_dict()[key], state[key])


@pytest.mark.parametrize('arch', ARCHS)
def test_optimizer_step_after_inference(arch, image):
    """Train a step, run packed inference, train another step: the weights
    and the outputs are those of the same steps without packing, and the
    optimiser updated the model's own parameters."""

    def two_steps(pack):
        model = _fresh(arch, _random_state(arch))
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        params = list(model.parameters())
        for step in range(2):
            model.train()
            opt.zero_grad()
            model(image)[0].square().mean().backward()
            opt.step()
            if step == 0 and pack:
                pack_cpu_linears(model.eval())
                _run(model, image)
        assert all(p is q for p, q in zip(model.parameters(), params))
        return model

    ours, plain = two_steps(True), two_steps(False)
    for (key, a), b in zip(ours.state_dict().items(),
                           plain.state_dict().values()):
        assert torch.equal(a, b), key
    pack_cpu_linears(ours.eval())
    torch.testing.assert_close(_run(ours, image), _run(plain.eval(), image),
                               **TOL)


def test_optimizer_step_on_a_packed_weight_raises(image):
    """A gradient left from before packing: the step cannot write the
    packed weight and says so (it is not skipped silently)."""
    model = _fresh('sapiens2_tiny', _random_state('sapiens2_tiny'))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(image)[0].sum().backward()
    pack_cpu_linears(model.eval())
    with pytest.raises(PackedWeightError):
        opt.step()


@pytest.mark.parametrize('arch', ARCHS)
def test_peft_merge_through_data(arch, image):
    """A LoRA merge, ``W += B @ A`` through ``.data``, on every linear layer
    of the first block: refused packed; merged on the plain form and packed
    again, the model computes the merged weights."""
    state = _random_state(arch)
    model = _packed_model(arch, state)
    block = (model.blocks if arch.startswith('sapiens2') else model.layers)[0]
    names = [n for n, m in block.named_modules()
             if isinstance(m, PackedCpuLinear)]
    gen = torch.Generator().manual_seed(2)
    prefix = 'blocks.0.' if arch.startswith('sapiens2') else 'layers.0.'
    want = dict(state)
    deltas = {}
    for name in names:
        layer = block.get_submodule(name)
        b = torch.randn(layer.out_features, 4, generator=gen) * 0.3
        a = torch.randn(4, layer.in_features, generator=gen) * 0.3
        deltas[name] = b @ a
        want[f'{prefix}{name}.weight'] = state[f'{prefix}{name}.weight'] + \
            deltas[name]
    with pytest.raises(PackedWeightError):
        block.get_submodule(names[0]).weight.data += deltas[names[0]]
    unpack_cpu_linears(model)
    for name in names:
        block.get_submodule(name).weight.data += deltas[name]
    pack_cpu_linears(model)
    got = _run(model, image)
    torch.testing.assert_close(got, _run(_fresh(arch, want), image), **TOL)
    assert float((got - _run(_fresh(arch, state), image)).abs().max()) > \
        MIN_CHANGE


def test_state_dict_copies_refuse_writes_and_train_restores(image):
    arch = 'sapiens2_tiny'
    state = _random_state(arch)
    model = _packed_model(arch, state)
    layer, key = _ffn_layer(model)
    out = model.state_dict()
    with pytest.raises(RuntimeError, match='inference tensor'):
        out[key].copy_(torch.zeros_like(out[key]))
    param = layer.weight
    model.train()
    assert type(layer) is nn.Linear and layer.weight is param
    assert type(param) is nn.Parameter and torch.equal(param, state[key])
    param.data.zero_()  # a plain weight again: writes are seen
    assert float(model.state_dict()[key].abs().max()) == 0


@pytest.mark.skipif(not packed_linear_supported(torch.bfloat16),
                    reason='bf16 packing needs AVX-512 or AVX-NE-CONVERT')
def test_bf16_form_holds_bf16_weights_only(image):
    """A bf16 form of a float32 model: the packed weights are its only copy
    (bf16 bytes), its outputs under autocast equal a fresh model's bf16
    form, and converting back gives the bf16-rounded weights."""
    arch = 'sapiens2_tiny'
    state = _random_state(arch)
    model = _fresh(arch, state)
    linear = {n: m.weight.numel() for n, m in model.named_modules()
              if type(m) is nn.Linear}
    assert pack_cpu_linears(model, torch.bfloat16) == len(linear)
    assert packed_weight_bytes(model) == 2 * sum(linear.values())
    for name in linear:
        weight = model.get_submodule(name).weight
        assert type(weight) is PackedParameter
        with torch._C.DisableTorchFunctionSubclass():
            assert weight.untyped_storage().nbytes() <= 4  # no data
    twin = _fresh(arch, state)
    pack_cpu_linears(twin, torch.bfloat16)
    with torch.autocast('cpu', torch.bfloat16):
        got, want = _run(model, image), _run(twin, image)
    assert torch.equal(got, want)
    model.train()
    for name in linear:
        key = f'{name}.weight'
        assert model.get_submodule(name).weight.dtype == torch.float32
        assert torch.equal(model.state_dict()[key],
                           state[key].bfloat16().float())


def test_copies_moves_and_refusals(image):
    arch = 'sapiens2_tiny'
    state = _random_state(arch)
    model = _packed_model(arch, state)
    want = _run(_fresh(arch, state), image)
    twin = copy.deepcopy(model)
    assert isinstance(twin.blocks[0].ffn.w3, PackedCpuLinear)
    torch.testing.assert_close(_run(twin, image), want, **TOL)
    with pytest.raises(PackedWeightError, match='state_dict'):
        pickle.dumps(model)
    with pytest.raises(PackedWeightError, match='CPU inference only'):
        model(image.clone().requires_grad_())
    with pytest.raises(PackedWeightError, match='CPU inference only'):
        torch.jit.trace(model, image, check_trace=False)
    # moving or casting converts back first
    model.double()
    assert not any(isinstance(m, PackedCpuLinear) for m in model.modules())
    torch.testing.assert_close(_run(model, image.double()).float(), want,
                               **TOL)


def test_tied_and_foreign_weights_stay_plain():
    tied = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
    tied[1].weight = tied[0].weight
    assert pack_cpu_linears(tied) == 0
    other = nn.Sequential(nn.Linear(4, 4).to('meta'),
                          nn.Linear(4, 4, dtype=torch.float64))
    assert pack_cpu_linears(other) == 0
