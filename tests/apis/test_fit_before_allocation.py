"""A checkpoint that does not fit the model is refused before the model is
allocated: its keys and shapes are checked on a meta-device skeleton."""
import pytest
import torch
from mmengine.config import Config

from sapiens_mm.apis import PoseInferencer
from sapiens_mm.apis.inference import init_model
from tiny_configs import TINY


@pytest.fixture
def real_parameters(monkeypatch):
    """Names of the parameters created with memory (not on ``meta``)."""
    made = []
    register = torch.nn.Module.register_parameter

    def spy(self, name, param):
        if param is not None and not param.is_meta:
            made.append(name)
        return register(self, name, param)

    monkeypatch.setattr(torch.nn.Module, 'register_parameter', spy)
    return made


def test_small_file_named_like_2b_builds_nothing(tmp_path, real_parameters):
    """A tiny pose state dict under an official 2B name: refused, listing
    the keys that do not fit, with no parameter allocated."""
    tiny = init_model(Config.fromfile(str(TINY['pose'])))
    path = tmp_path / 'sapiens_2b_goliath_best_goliath_AP_573.pth'
    torch.save({'state_dict': tiny.state_dict()}, str(path))
    real_parameters.clear()
    with pytest.raises(RuntimeError, match='wrong-shape keys'):
        PoseInferencer(str(path), device='cpu')
    assert real_parameters == []


def test_fitting_checkpoint_still_loads(tmp_path, real_parameters):
    cfg = Config.fromfile(str(TINY['seg']))
    ref = init_model(cfg)
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.5)
    path = tmp_path / 'seg.pth'
    torch.save({'state_dict': ref.state_dict()}, str(path))
    model = init_model(cfg, str(path))
    got, want = model.state_dict(), ref.state_dict()
    assert all(torch.equal(got[k], want[k]) for k in want)
    assert not any(p.is_meta for p in model.parameters())
    # a wrong task's file: refused on the skeleton too
    real_parameters.clear()
    with pytest.raises(RuntimeError, match='does not fit'):
        init_model(Config.fromfile(str(TINY['depth'])), str(path))
    assert real_parameters == []


def test_stored_dataset_meta_that_disagrees_is_refused(tmp_path):
    """A seg checkpoint whose meta lists 3 classes for a 28-class head:
    one clear error at load time, not an assertion part-way through a
    run."""
    cfg = Config.fromfile(str(TINY['seg']))
    model = init_model(cfg)
    path = tmp_path / 'seg.pth'
    torch.save({'state_dict': model.state_dict(),
                'meta': {'dataset_meta': {'classes': ['a', 'b', 'c']}}},
               str(path))
    n = model.decode_head.num_classes
    with pytest.raises(ValueError, match=rf'describes 3 classes, but the '
                       rf'model of the config predicts {n}'):
        init_model(cfg, str(path))
