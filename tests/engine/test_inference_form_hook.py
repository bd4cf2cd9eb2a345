"""InferenceFormHook runs a Runner's validation / test loops on packed
linear layers without ever computing with other weights than the current
ones, next to mmengine's EMAHook, which swaps the averaged weights in
through ``.data`` before each validation and back after it.

The reference for each validation is a fresh plain model loaded with the
weights the model held when validation began (recorded by a hook of the
lowest priority, after EMAHook's swap, before any packing), run on the same
batches. Tolerance: float32 packed GEMMs sum in another order than MKL
(measured 1e-7 here); the EMA weights differ from the training weights by
far more (asserted), so a stale or unswapped weight cannot pass.
"""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from mmengine.evaluator import BaseMetric, Evaluator
from mmengine.hooks import Hook
from mmengine.model import BaseModel
from mmengine.runner import Runner
from torch.utils.data import Dataset

from sapiens_mm.engine import InferenceFormHook
from sapiens_mm.utils.cpu_features import packed_linear_supported
from sapiens_mm.utils.cpu_linear import PackedCpuLinear

pytestmark = pytest.mark.skipif(
    not packed_linear_supported(torch.float32),
    reason="needs oneDNN's packed float32 linear layer")


class Pairs(Dataset):

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 8, generator=g)
        self.y = torch.randn(n, 2, generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return dict(x=self.x[i], y=self.y[i])


class TwoLayers(BaseModel):
    """Two linear layers; ``predict`` returns the outputs and whether the
    layers ran packed."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc1, self.fc2 = nn.Linear(8, 32), nn.Linear(32, 2)

    def forward(self, x, y, mode='loss'):
        out = self.fc2(F.gelu(self.fc1(x)))
        if mode == 'loss':
            return dict(loss=(out - y).square().mean())
        packed = isinstance(self.fc1, PackedCpuLinear)
        return [dict(out=o.clone(), packed=packed) for o in out]


class Record(BaseMetric):
    """Keeps every validation's outputs (in ``runs``)."""

    def __init__(self, runs):
        super().__init__()
        self.runs = runs

    def process(self, data_batch, data_samples):
        self.results.extend(data_samples)

    def compute_metrics(self, results):
        self.runs.append(list(results))
        return dict(n=len(results))


class WeightsAtValidation(Hook):
    """The model's state dict when validation starts (after every other
    ``before_val_epoch`` hook) and when it ends (after every other
    ``after_val_epoch`` hook), as plain tensors."""

    priority = 'LOWEST'

    def __init__(self):
        self.start, self.end = [], []

    def before_val_epoch(self, runner):
        self.start.append(copy.deepcopy(runner.model.state_dict()))

    def after_val_epoch(self, runner, metrics=None):
        self.end.append(copy.deepcopy(runner.model.state_dict()))


class TrainWeights(Hook):
    """The training weights just before validation swaps anything."""

    priority = 'HIGHEST'

    def __init__(self):
        self.weights = []

    def before_val_epoch(self, runner):
        self.weights.append(copy.deepcopy(runner.model.state_dict()))


def _loader(dataset):
    return dict(dataset=dataset, batch_size=4, num_workers=0,
                sampler=dict(type='DefaultSampler', shuffle=False),
                collate_fn=dict(type='default_collate'))


def test_ema_validation_runs_packed_on_the_swapped_weights(tmp_path):
    runs, at_val, train = [], WeightsAtValidation(), TrainWeights()
    val_data = Pairs(8, seed=1)
    runner = Runner(
        model=TwoLayers(), work_dir=str(tmp_path),
        train_dataloader=_loader(Pairs(16, seed=0)),
        val_dataloader=_loader(val_data),
        val_evaluator=Evaluator([Record(runs)]),
        optim_wrapper=dict(optimizer=dict(type='SGD', lr=0.2)),
        train_cfg=dict(by_epoch=True, max_epochs=2, val_interval=1),
        val_cfg=dict(),
        default_hooks=dict(checkpoint=None, logger=None),
        custom_hooks=[dict(type='EMAHook', momentum=0.5),
                      InferenceFormHook(), at_val, train],
        experiment_name=f'ema_packed_{tmp_path.name}',
        default_scope='mmengine')
    runner.train()
    assert len(runs) == len(at_val.start) == 2
    for i, outputs in enumerate(runs):
        assert all(o['packed'] for o in outputs)  # validation ran packed
        ema = at_val.start[i]
        assert max(float((ema[k] - train.weights[i][k]).abs().max())
                   for k in ema) > 0.05  # EMAHook swapped other weights in
        fresh = TwoLayers()
        fresh.load_state_dict(ema)
        with torch.no_grad():
            want = fresh.fc2(F.gelu(fresh.fc1(val_data.x)))
        got = torch.stack([o['out'] for o in outputs])
        torch.testing.assert_close(got, want, rtol=0, atol=1e-5)
        # after validation: the training weights, back in place
        for key, value in train.weights[i].items():
            assert torch.equal(at_val.end[i][key], value), key
    model = runner.model
    assert type(model.fc1) is nn.Linear and type(model.fc1.weight) is \
        nn.Parameter


def test_hook_leaves_the_loops_it_is_not_asked_for(tmp_path):
    """test=False: the test loop runs the plain layers."""
    runs = []
    runner = Runner(
        model=TwoLayers(), work_dir=str(tmp_path),
        test_dataloader=_loader(Pairs(4, seed=2)),
        test_evaluator=Evaluator([Record(runs)]), test_cfg=dict(),
        default_hooks=dict(checkpoint=None, logger=None),
        custom_hooks=[InferenceFormHook(test=False)],
        experiment_name=f'plain_test_{tmp_path.name}',
        default_scope='mmengine')
    runner.test()
    assert runs and not any(o['packed'] for o in runs[0])


def test_test_tool_runs_packed_and_computes_the_plain_models_outputs(
        tmp_path, monkeypatch):
    """tools/test.py evaluates with the linear layers packed (the
    inferencers' speed): the dumped logits equal those of the plain model
    (--no-inference-form) within float32 rounding, and the log says so."""
    import mmengine
    from cluster_helpers import write_tiny_seg_checkpoint
    from tool_helpers import load_tool

    cfg_path, ckpt = write_tiny_seg_checkpoint(tmp_path, monkeypatch, n=2)
    tool = load_tool('test')
    runs = {}
    for flag in ([], ['--no-inference-form']):
        dump = tmp_path / f'preds{len(flag)}.pkl'
        tool.main([str(cfg_path), str(ckpt), '--work-dir',
                   str(tmp_path / f'w{len(flag)}'), '--dump', str(dump),
                   *flag])
        runs[bool(flag)] = mmengine.load(str(dump))
        log = next((tmp_path / f'w{len(flag)}').glob('*/*.log')).read_text()
        assert ('linear layers packed for CPU inference' in log) != bool(flag)
    packed, plain = runs[False], runs[True]
    assert len(packed) == len(plain) == 2
    for a, b in zip(packed, plain):
        torch.testing.assert_close(a['seg_logits']['data'],
                                   b['seg_logits']['data'], rtol=0,
                                   atol=1e-4)
