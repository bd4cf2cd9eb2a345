"""A checkpoint alone builds the model it was trained as: the config it
carries as data wins; without one, the shipped config its weights were
matched to must fit, and a misfit names the differing option."""
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from mmengine.config import Config

from sapiens_mm.apis.inference import init_model
from sapiens_mm.apis.inferencers.model_spec import (resolve_model,
                                                    task_of_checkpoint)
from sapiens_mm.checkpoint.config_data import (UnsafeModelError,
                                               config_to_data)
from sapiens_mm.zoo import ConfigMismatchError

ROOT = Path(__file__).resolve().parents[2]
COCO_TINY = ROOT / 'configs/pose/coco/sapiens_tiny-210e_coco-256x192.py'


def _narrow_pose_cfg():
    """The tiny COCO pose config with 32-channel head layers, as
    ``make demo`` trains it (the shipped config has 64)."""
    cfg = Config.fromfile(str(COCO_TINY))
    cfg.model.head.deconv_out_channels = (32, 32)
    cfg.model.head.conv_out_channels = (32, 32)
    return cfg


def _save(path, cfg, with_data):
    model = init_model(cfg)
    meta = dict(cfg=cfg.pretty_text)  # what mmengine writes: Python text
    if with_data:
        meta['config_data'] = config_to_data(cfg)
    torch.save(dict(meta=meta, state_dict=model.state_dict()), str(path))
    return model


@pytest.fixture(scope='module')
def narrow(tmp_path_factory):
    root = tmp_path_factory.mktemp('ckpt')
    cfg = _narrow_pose_cfg()
    model = _save(root / 'iter_10.pth', cfg, with_data=True)
    _save(root / 'text_only.pth', cfg, with_data=False)
    return root, model


def test_config_as_data_builds_the_trained_model(narrow):
    root, model = narrow
    resolved = resolve_model(str(root / 'iter_10.pth'))
    assert resolved.task == 'pose' and resolved.info is None
    assert tuple(resolved.cfg.model.head.deconv_out_channels) == (32, 32)
    assert task_of_checkpoint(str(root / 'iter_10.pth')) == 'pose'
    built = init_model(resolved.cfg, resolved.weights)
    for key, value in model.state_dict().items():
        torch.testing.assert_close(built.state_dict()[key], value)


def test_text_only_checkpoint_names_the_differing_option(narrow):
    root, _ = narrow
    with pytest.raises(ConfigMismatchError) as err:
        resolve_model(str(root / 'text_only.pth'))
    msg = str(err.value)
    assert ('model.head.deconv_out_channels 32 in the file, 64 in '
            'sapiens_tiny-210e_coco-256x192.py') in msg
    assert 'model.head.conv_out_channels 32 in the file' in msg
    assert 'dict(config=CFG' in msg and '--pose-config' not in msg


def test_stored_config_that_could_run_code_is_refused(tmp_path):
    cfg = _narrow_pose_cfg()
    model = init_model(cfg)
    data = config_to_data(cfg)
    data['model']['head']['type'] = 'os.system'
    torch.save(dict(meta=dict(config_data=data),
                    state_dict=model.state_dict()), str(tmp_path / 'x.pth'))
    with pytest.raises(UnsafeModelError, match='os.system'):
        resolve_model(str(tmp_path / 'x.pth'))


def test_cli_runs_the_checkpoint_alone_and_speaks_flags(narrow, tmp_path):
    from sapiens_mm.cli.infer import cli
    root, _ = narrow
    img = tmp_path / 'photo.png'
    cv2.imwrite(str(img), np.full((64, 48, 3), 128, np.uint8))
    cli([str(img), '--pose', str(root / 'iter_10.pth'), '--detector',
         'none', '--device', 'cpu', '--no-progress', '--out-dir',
         str(tmp_path / 'out')])
    assert (tmp_path / 'out/pose/photo.json').is_file()
    with pytest.raises(SystemExit) as exit_:
        cli([str(img), '--pose', str(root / 'text_only.pth'), '--device',
             'cpu', '--out-dir', str(tmp_path / 'out2')])
    msg = str(exit_.value.code)  # SystemExit(message): exit status 1
    assert '\n' not in msg
    assert '--pose-config CFG' in msg and 'dict(config=' not in msg
    assert 'deconv_out_channels 32 in the file, 64 in' in msg
    print(msg)
