"""Sapiens2 file names and weights are recognised next to v1 ones and map
to the shipped configs."""
import pytest
import torch
from sapiens2_helpers import build_tiny, leaf

from sapiens_mm.zoo.model_zoo import (UnrecognizedCheckpointError,
                                       parse_checkpoint_name,
                                       recognize_checkpoint,
                                       recognize_state_dict, shipped_config)
from sapiens_mm.checkpoint.sapiens2_layout import save_official_checkpoint


@pytest.mark.parametrize('size', ['0.4b', '0.8b', '1b', '5b'])
@pytest.mark.parametrize('task', ['pose', 'seg', 'normal', 'pointmap'])
def test_official_names_map_to_the_shipped_configs(task, size):
    info = parse_checkpoint_name(f'/x/sapiens2_{size}_{task}.safetensors')
    assert (info.task, info.size, info.version, info.source) == (
        task, size, 2, 'name')
    assert info.config == leaf(task, size)


def test_v1_names_are_unchanged_and_pretrain_files_refused():
    info = parse_checkpoint_name('sapiens_1b_goliath_best_goliath_AP_639.pth')
    assert (info.task, info.size, info.version) == ('pose', '1b', 1)
    assert parse_checkpoint_name('sapiens2_1b_depth.safetensors') is None
    for name in ('sapiens2_0.4b_pretrain.safetensors',
                 'sapiens2_1b_4k_pretrain.safetensors'):
        with pytest.raises(UnrecognizedCheckpointError,
                           match='Sapiens2 pretraining'):
            parse_checkpoint_name(name)
    with pytest.raises(ValueError, match='Unknown Sapiens2 task-model size'):
        shipped_config('pose', '0.3b', version=2)
    with pytest.raises(ValueError, match='No Sapiens2 config'):
        shipped_config('depth', '1b', version=2)


@pytest.mark.parametrize('task', ['pose', 'seg', 'normal', 'pointmap',
                                  'albedo', 'matting'])
def test_renamed_official_layout_files_are_recognised_by_their_weights(
        tmp_path, task):
    _, model = build_tiny(task)
    path = tmp_path / 'renamed.safetensors'
    save_official_checkpoint(model, str(path))
    info = recognize_checkpoint(path)
    assert (info.task, info.size, info.version, info.source) == (
        task, 'tiny', 2, 'keys')
    assert info.config == leaf(task, 'tiny')
    # this project's own layout (pose head under head.) too
    state = model.state_dict()
    assert recognize_state_dict(state).task == task


def test_unknown_sapiens2_heads_are_refused_with_a_reason():
    state = {'backbone.patch_embed.projection.weight': torch.zeros(64, 3, 1,
                                                                   1),
             'backbone.storage_tokens': torch.zeros(1, 8, 64),
             'decode_head.conv_seg.weight': torch.zeros(28, 64, 1, 1)}
    with pytest.raises(UnrecognizedCheckpointError, match='29'):
        recognize_state_dict(state)
    del state['decode_head.conv_seg.weight']
    with pytest.raises(UnrecognizedCheckpointError, match='without a known'):
        recognize_state_dict(state)
    state['backbone.patch_embed.projection.weight'] = torch.zeros(768, 3, 1,
                                                                  1)
    with pytest.raises(UnrecognizedCheckpointError, match='width 768'):
        recognize_state_dict(state)
