"""mmengine's checkpoint schemes: sapiens_mm's reader serves local paths
only inside safe_checkpoint_loading (restored on exit, errors included,
nested blocks too), and the hf:// scheme is added without replacing
another library's."""
import pytest
import torch
from mmengine.runner.checkpoint import CheckpointLoader

from sapiens_mm.zoo import loader
from sapiens_mm.zoo.loader import (load_hub, load_local,
                                   register_mmengine_loaders,
                                   safe_checkpoint_loading)


def _local():
    return CheckpointLoader._schemes['']


def test_scope_routes_local_paths_and_restores_the_loader(tmp_path):
    stock = _local()
    assert stock is not load_local
    path = tmp_path / 'ckpt.pth'
    torch.save({'state_dict': {'w': torch.ones(2)},
                'meta': {'sigmas': torch.zeros(1).numpy()}}, path)
    with pytest.raises(Exception, match='Weights only load failed'):
        CheckpointLoader.load_checkpoint(str(path))
    with safe_checkpoint_loading():
        assert _local() is load_local
        with safe_checkpoint_loading():
            assert _local() is load_local
        assert _local() is load_local  # the outer block still holds
        ckpt = CheckpointLoader.load_checkpoint(str(path))
        assert torch.equal(ckpt['state_dict']['w'], torch.ones(2))
    assert _local() is stock
    with pytest.raises(RuntimeError, match='boom'), \
            safe_checkpoint_loading():
        raise RuntimeError('boom')
    assert _local() is stock


def test_hf_scheme_is_added_not_forced(monkeypatch):
    assert CheckpointLoader._schemes[loader.HF_PREFIX] is load_hub

    def theirs(filename, map_location=None):
        return {}

    monkeypatch.setitem(CheckpointLoader._schemes, loader.HF_PREFIX, theirs)
    register_mmengine_loaders()  # another library's loader stays
    assert CheckpointLoader._schemes[loader.HF_PREFIX] is theirs
    monkeypatch.delitem(CheckpointLoader._schemes, loader.HF_PREFIX)
    register_mmengine_loaders()
    assert CheckpointLoader._schemes[loader.HF_PREFIX] is load_hub
