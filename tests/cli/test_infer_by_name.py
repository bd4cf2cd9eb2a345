"""``python -m sapiens_mm IMG --pose NAME``: a released model by registry
name or repository id, downloaded from a loopback stand-in for the Hub,
gives exactly what the same command gives with the local file."""
import json

import cv2
import numpy as np
import pytest
from fake_hub import FakeHub
from sapiens2_helpers import leaf

from sapiens_mm.cli.infer import cli, main
from sapiens_mm.zoo.cards import MODEL_INDEX_ENV

REPO, FILE = 'facebook/sapiens2-pose-0.4b', 'sapiens2_0.4b_pose.safetensors'


@pytest.fixture
def tiny_release(tmp_path, monkeypatch):
    """A tiny Sapiens2 pose model in the official layout, and a test-only
    registry entry that gives the official name the tiny config."""
    from sapiens_mm.apis.inference import init_model
    from sapiens_mm.checkpoint import save_official_checkpoint
    model = init_model(str(leaf('pose', 'tiny')))
    local = tmp_path / 'tiny_pose.safetensors'  # recognised by its weights
    save_official_checkpoint(model, str(local))
    (tmp_path / 'metafile.yml').write_text(f"""
Models:
  - Name: sapiens2-pose-0.4b
    Config: {leaf('pose', 'tiny')}
    Metadata: {{Task: pose, Size: tiny, Version: 2, License: Sapiens2 License}}
    Weights: https://huggingface.co/{REPO}/resolve/main/{FILE}
""")
    monkeypatch.setenv(MODEL_INDEX_ENV, str(tmp_path / 'metafile.yml'))
    image = np.random.default_rng(0).integers(0, 255, (80, 60, 3), np.uint8)
    cv2.imwrite(str(tmp_path / 'person.png'), image)
    return local


def _keypoints(tmp_path, pose: str, out: str) -> list:
    main([str(tmp_path / 'person.png'), '--pose', pose, '--detector', 'none',
          '--out-dir', str(tmp_path / out), '--device', 'cpu',
          '--no-progress', '--no-save-vis'])
    return json.loads((tmp_path / out / 'pose' / 'person.json').read_text())


def test_pose_by_name_and_repo_id_offline_and_gated(tiny_release, tmp_path,
                                                    monkeypatch):
    expected = _keypoints(tmp_path, str(tiny_release), 'local')
    with FakeHub() as hub:
        monkeypatch.setenv('HF_ENDPOINT', hub.endpoint)
        monkeypatch.setenv('HF_HUB_CACHE', str(tmp_path / 'hf-cache'))
        monkeypatch.delenv('HF_HUB_OFFLINE', raising=False)
        hub.add_file(REPO, FILE, tiny_release.read_bytes())
        assert _keypoints(tmp_path, 'sapiens2-pose-0.4b', 'name') == expected
        assert len(hub.downloads(FILE)) == 1
        seen = len(hub.requests)
        monkeypatch.setenv('HF_HUB_OFFLINE', '1')
        assert _keypoints(tmp_path, 'sapiens2-pose-0.4b',
                          'offline') == expected
        monkeypatch.delenv('HF_HUB_OFFLINE')
        assert _keypoints(tmp_path, REPO, 'repo') == expected
        assert len(hub.requests) == seen  # from the cache both times

        hub.gate('facebook/sapiens2-pose-1b')
        with pytest.raises(SystemExit) as e:
            cli([str(tmp_path / 'person.png'), '--pose', 'sapiens2-pose-1b',
                 '--detector', 'none', '--out-dir', str(tmp_path / 'gated')],
                prog='python -m sapiens_mm')
    message = str(e.value)
    assert message.count('\n') == 0
    assert 'facebook/sapiens2-pose-1b is gated' in message
    assert 'HF_TOKEN' in message


def test_weights_that_do_not_fit_a_registry_model_get_the_config_hint(
        tiny_release, tmp_path, monkeypatch):
    """The registry's file holds another model (a tiny Sapiens2 seg model
    under the pose name): one line that says what differs and how to pass
    the config, as for a local file, not the loader's lists of keys."""
    from sapiens_mm.apis.inference import init_model
    from sapiens_mm.checkpoint import save_official_checkpoint
    seg = tmp_path / 'tiny_seg.safetensors'
    save_official_checkpoint(init_model(str(leaf('seg', 'tiny'))), str(seg))
    with FakeHub() as hub:
        monkeypatch.setenv('HF_ENDPOINT', hub.endpoint)
        monkeypatch.setenv('HF_HUB_CACHE', str(tmp_path / 'hf-cache'))
        monkeypatch.delenv('HF_HUB_OFFLINE', raising=False)
        hub.add_file(REPO, FILE, seg.read_bytes())
        with pytest.raises(SystemExit) as e:
            cli([str(tmp_path / 'person.png'), '--pose', 'sapiens2-pose-0.4b',
                 '--detector', 'none', '--device', 'cpu', '--out-dir',
                 str(tmp_path / 'out')], prog='python -m sapiens_mm')
    message = str(e.value)
    assert message.count('\n') == 0
    assert message.startswith(
        'python -m sapiens_mm: error: sapiens2-pose-0.4b was recognised as '
        'a pose model, but its weights do not fit')
    assert 'pass that config: --pose-config CFG --pose sapiens2-pose-0.4b' \
        in message
    assert 'weights the file has that' in message
    assert 'missing keys [' not in message and len(message) < 700, message
