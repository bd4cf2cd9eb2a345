"""A config stored in a file (a checkpoint's ``meta['config_data']``, an
exported model's metadata) never makes mmengine import a module: scopes,
registry keys, storage backends and the other values mmengine turns into
imports are refused or restricted to the packages sapiens_mm registers into.

The attacks plant a package (with the ``registry`` module mmengine imports
for a scope) that creates a marker file when imported, in the folder the
process runs in (the first entry of ``sys.path`` for ``python -m`` and
``python -c``)."""
import json
import os
import subprocess
import sys

import cv2
import numpy as np
import onnx
import pytest
import torch
from mmengine.config import Config
from mmengine.registry import MODELS

from attack_helpers import changed, plant_package, tree_state
from sapiens_mm.apis.inference import init_model, set_input_size
from sapiens_mm.checkpoint.config_data import (STORED_CONFIG_SCOPES,
                                               UnsafeModelError,
                                               config_from_data,
                                               config_to_data)
from tiny_configs import ROOT, TINY

PLANTED = 'sapiens_mm_planted_scope'


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """The planted package on ``sys.path``; afterwards it was never
    imported."""
    marker = tmp_path / 'MARKER'
    plant_package(tmp_path / 'plant', PLANTED, marker)
    monkeypatch.syspath_prepend(str(tmp_path / 'plant'))
    yield marker
    for name in [m for m in sys.modules if m.startswith(PLANTED)]:
        sys.modules.pop(name)


def _pose_data():
    return config_to_data(Config.fromfile(str(TINY['pose'])))


def test_scope_attacks_are_real(planted):
    """mmengine imports ``<scope>.registry`` for a ``_scope_`` and for the
    scope of a ``type`` it builds (so the refusals below are tested against
    working attacks)."""
    MODELS.build(dict(type='BaseDataPreprocessor', _scope_=PLANTED))
    assert planted.exists()
    planted.unlink()
    sys.modules.pop(f'{PLANTED}.registry', None)
    sys.modules.pop(PLANTED, None)
    with pytest.raises(Exception):  # imported, then not found
        MODELS.build(dict(type=f'{PLANTED}.Evil'))
    assert planted.exists()
    planted.unlink()


def _set(path, value):
    """A change of the stored config: ``path`` ('model.head') gets the
    item ``value``."""
    def change(data):
        node = data
        for key in path.split('.') if path else []:
            node = node[key]
        node.update(value)
    return change


@pytest.mark.parametrize('path,value,words', [
    ('', {'_scope_': PLANTED}, '_scope_'),
    ('model', {'_scope_': PLANTED}, 'model._scope_'),
    ('model.head', {'_scope_': 'this'}, 'mmengine imports'),
    ('', {'default_scope': PLANTED}, 'default_scope'),
    ('model', {'type': f'{PLANTED}.Evil'}, 'not a class registered'),
    ('model', {'type': 'mmcv.ConvModule'}, 'not a class registered'),
    ('', {'optim_wrapper': {'type': 'OptimWrapper',
                            'constructor': f'{PLANTED}.C'}}, 'constructor'),
    ('', {'runner_type': PLANTED}, 'runner_type'),
    ('model.backbone', {'init_cfg': {'type': 'Pretrained',
                                     'checkpoint': 's3://bucket/x.pth'}},
     's3://'),
    ('', {'load_from': 'cluster:petrel://x.pth'}, 'petrel://'),
    ('', {'backend_args': {'backend': 'petrel'}}, 'backend_args'),
    ('model', {'trust_remote_code': True}, 'trust_remote_code'),
])
def test_every_import_key_is_refused(planted, path, value, words):
    data = _pose_data()
    _set(path, value)(data)
    with pytest.raises(UnsafeModelError, match=words) as err:
        config_from_data(json.loads(json.dumps(data)), 'x.pth')
    assert '\n' not in str(err.value)
    assert not planted.exists()


def test_registered_name_that_is_also_a_module_is_refused(tmp_path,
                                                          monkeypatch):
    """``Registry.get`` imports a name its registry does not know: a
    registered name of another registry (a transform given as a model)
    imports a module of that name planted beside the process."""
    name = 'PackPoseInputs'  # registered (TRANSFORMS), not a model
    marker = tmp_path / 'MARKER'
    plant_package(tmp_path / 'plant', name, marker)
    monkeypatch.syspath_prepend(str(tmp_path / 'plant'))
    data = _pose_data()
    data['model']['type'] = name
    with pytest.raises(UnsafeModelError, match='also a module Python would '
                       'import'):
        config_from_data(data, 'x.pth')
    assert not marker.exists()


def test_allowed_scopes_and_local_storage_pass():
    data = _pose_data()
    data['default_scope'] = 'mmpose'
    data['model']['_scope_'] = 'mmpose'
    data['model']['data_preprocessor']['_scope_'] = 'mmengine'
    data['backend_args'] = None
    data['file_client_args'] = {'backend': 'disk'}
    data['load_from'] = 'https://example.com/w.pth'
    data['model']['trust_remote_code'] = False
    cfg = config_from_data(data, 'x.pth')
    assert cfg.model._scope_ == 'mmpose'
    assert set(STORED_CONFIG_SCOPES) == {'mmengine', 'mmpretrain', 'mmpose',
                                         'mmseg', 'mmdet'}


@pytest.mark.slow
def test_checkpoint_and_onnx_with_scope_refused_by_the_cli(tmp_path):
    """``python -m sapiens_mm IMG --pose FILE``, run in the folder that
    holds the planted package: a checkpoint whose ``meta.config_data`` has a
    ``_scope_`` and an .onnx (exported by the project's exporter) whose
    config metadata has a scoped ``type`` and a ``_scope_`` are each
    refused in one line; the package is never imported and nothing outside
    the run's output folder changes."""
    from sapiens_mm.deploy import export_model
    plant = tmp_path / 'plant'
    marker = tmp_path / 'MARKER'
    plant_package(plant, PLANTED, marker)
    cfg = set_input_size(Config.fromfile(str(TINY['pose'])), (64, 48))
    model = init_model(cfg)
    data = config_to_data(cfg)
    data['model']['_scope_'] = PLANTED
    torch.save(dict(meta=dict(config_data=data),
                    state_dict=model.state_dict()), plant / 'scope.pth')
    onnx_path = export_model(cfg, None, str(tmp_path / 'export'),
                             formats='onnx', name='pose')['onnx']
    for name, edit in (('type', dict(type=f'{PLANTED}.Evil')),
                       ('scope', dict(_scope_=PLANTED))):
        proto = onnx.load(onnx_path, load_external_data=False)
        prop = next(p for p in proto.metadata_props if p.key == 'config')
        config = json.loads(prop.value)
        config['model'].update(edit)
        prop.value = json.dumps(config)
        onnx.save(proto, str(plant / f'{name}.onnx'))
    cv2.imwrite(str(plant / 'img.png'), np.full((40, 30, 3), 90, np.uint8))
    files = ['scope.pth', 'type.onnx', 'scope.onnx']
    script = (
        'import runpy, sys\n'
        f'for path in {files!r}:\n'
        '    sys.argv = ["sapiens_mm", "img.png", "--pose", path,\n'
        '                "--out-dir", "out", "--detector", "none"]\n'
        '    try:\n'
        '        runpy.run_module("sapiens_mm", run_name="__main__")\n'
        '    except SystemExit as e:\n'
        '        print("EXIT", e.code)\n'
        f'print("IMPORTED", {PLANTED!r} in sys.modules)\n')
    before = tree_state(tmp_path, skip=[plant / 'out'])
    proc = subprocess.run([sys.executable, '-c', script], cwd=plant,
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('EXIT')]
    assert len(lines) == 3, proc.stdout + proc.stderr[-3000:]
    for line, words in zip(lines, ('model._scope_', 'model.type',
                                   'model._scope_')):
        assert 'python -m sapiens_mm: error:' in line and words in line, \
            line
    assert 'IMPORTED False' in proc.stdout
    assert not marker.exists(), 'the stored config imported a module'
    assert changed(before, tree_state(tmp_path, skip=[plant / 'out'])) == {}
