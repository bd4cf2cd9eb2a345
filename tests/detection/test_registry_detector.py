"""The official Sapiens person detector (RTMDet-m) from the model registry:
``detector='rtmdet-m'`` (``--detector rtmdet-m``) downloads it from a
loopback stand-in for the Hub and runs it with the shipped mmdet config;
``detector='auto'``, the default, picks it where mmdet runs and its weights
are cached or downloadable, else falls back to OpenCV's HOG detector with
one short log line, and a note for the pose pictures (``fallback``)."""
import io
import socket

import numpy as np
import pytest
import torch
from fake_hub import FakeHub

from sapiens_mm.detection import person_detector
from sapiens_mm.detection.person_detector import (
    MMDetPersonDetector,
    OpenCVPersonDetector,
    build_person_detector,
)
from sapiens_mm.zoo import HubError, find_card

CARD = find_card('rtmdet-m')


@pytest.fixture(scope='module')
def rtmdet_weights():
    """Random RTMDet-m weights in fp16 (a small file) as checkpoint bytes."""
    mmdet_apis = pytest.importorskip('mmdet.apis')
    model = mmdet_apis.init_detector(str(CARD.config), None, device='cpu')
    buffer = io.BytesIO()
    torch.save({'state_dict': {k: v.half() if v.is_floating_point() else v
                               for k, v in model.state_dict().items()}},
               buffer)
    return buffer.getvalue()


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A loopback Hub as HF_ENDPOINT, an empty cache, online."""
    with FakeHub() as fake:
        monkeypatch.setenv('HF_ENDPOINT', fake.endpoint)
        monkeypatch.setenv('HF_HUB_CACHE', str(tmp_path / 'hf-cache'))
        monkeypatch.delenv('HF_HUB_OFFLINE', raising=False)
        yield fake


@pytest.fixture
def logged(monkeypatch):
    lines = []
    monkeypatch.setattr(person_detector, 'print_log',
                        lambda msg, **kw: lines.append(
                            (kw.get('level', 20), msg)))
    return lines


def test_rtmdet_m_by_name_downloads_and_runs(hub, rtmdet_weights):
    hub.add_file(CARD.repo_id, CARD.filename, rtmdet_weights)
    detector = build_person_detector('sapiens-pose-bbox-detector')
    assert len(hub.downloads(CARD.filename)) == 1
    assert isinstance(detector, MMDetPersonDetector)
    assert detector.describe()['checkpoint'].endswith(CARD.filename)
    boxes, scores = detector(np.zeros((64, 48, 3), np.uint8))
    assert boxes.shape[1:] == (4, ) and scores.shape == boxes.shape[:1]
    with pytest.raises(ValueError, match='rtmdet-m'):
        build_person_detector('rtmdet-x')


def test_the_default_is_rtmdet_m_where_mmdet_runs_and_the_hub_answers(
        hub, rtmdet_weights, logged, monkeypatch):
    hub.add_file(CARD.repo_id, CARD.filename, rtmdet_weights)
    detector = build_person_detector()  # the default: 'auto'
    assert isinstance(detector, MMDetPersonDetector)
    assert detector.describe()['checkpoint'].endswith(CARD.filename)
    assert len(hub.downloads(CARD.filename)) == 1
    boxes, scores = detector(np.zeros((64, 48, 3), np.uint8))
    assert boxes.shape[1:] == (4, ) and scores.shape == boxes.shape[:1]
    assert len(logged) == 1 and logged[0][1].startswith(
        f'Person detector: RTMDet-m ({CARD.repo_id})')
    assert detector.label == 'RTMDet-m' and detector.fallback is None
    # then offline: the cached weights, no request
    monkeypatch.setenv('HF_HUB_OFFLINE', '1')
    seen = len(hub.requests)
    assert isinstance(build_person_detector('auto'), MMDetPersonDetector)
    assert len(hub.requests) == seen


def test_the_default_falls_back_to_hog_offline_without_the_weights(
        hub, logged, monkeypatch):
    monkeypatch.setattr(person_detector, 'mmdet_import_error', lambda: None)
    monkeypatch.setenv('HF_HUB_OFFLINE', '1')
    detector = build_person_detector('auto')
    assert isinstance(detector, OpenCVPersonDetector)
    assert detector.method == 'hog'
    assert hub.requests == []
    ((level, line), ) = logged
    assert level == 20 and line.startswith('Person detector: OpenCV HOG')
    assert 'HF_HUB_OFFLINE' in line and 'tools/download.py rtmdet-m' in line
    assert detector.fallback == 'RTMDet-m weights not cached'
    # named explicitly, the missing file is an error
    with pytest.raises(HubError, match='HF_HUB_OFFLINE'):
        build_person_detector('rtmdet-m')


def test_the_default_falls_back_to_hog_without_mmdet(hub, logged,
                                                     monkeypatch):
    monkeypatch.setattr(person_detector, 'mmdet_import_error',
                        lambda: 'mmdet is not installed')
    detector = build_person_detector('auto')
    assert isinstance(detector, OpenCVPersonDetector)
    assert hub.requests == []  # nothing downloaded for a detector not run
    ((level, line), ) = logged
    assert 'mmdet is not installed' in line and 'pip install mmdet' in line
    assert detector.fallback == 'mmdet not installed'
    assert detector.label == 'OpenCV HOG'


def test_without_network_the_default_falls_back_with_a_warning(
        tmp_path, logged, monkeypatch):
    monkeypatch.setattr(person_detector, 'mmdet_import_error', lambda: None)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    monkeypatch.setenv('HF_ENDPOINT', f'http://127.0.0.1:{port}')
    monkeypatch.setenv('HF_HUB_CACHE', str(tmp_path / 'hf-cache'))
    monkeypatch.delenv('HF_HUB_OFFLINE', raising=False)
    detector = build_person_detector('auto')
    assert isinstance(detector, OpenCVPersonDetector)
    # one short warning (no advice to go offline: nothing is cached); the
    # Hub's own error at debug level
    (debug, ), ((level, line), ) = (
        [m for lv, m in logged if lv < 20], [e for e in logged if e[0] >= 20])
    assert 'could not reach the Hub' in debug
    assert level == 30 and 'Hugging Face Hub could not be reached' in line
    assert 'tools/download.py rtmdet-m' in line and '\n' not in line
    assert 'HF_HUB_OFFLINE' not in line and len(line) < 200, line
    assert detector.fallback == 'RTMDet-m weights not downloaded'
    # named explicitly, the failed download is a one-line error
    with pytest.raises(HubError, match='could not reach the Hub'):
        build_person_detector('rtmdet-m')
