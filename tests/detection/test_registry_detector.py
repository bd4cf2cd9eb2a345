"""``detector='rtmdet-m'`` (``--detector rtmdet-m``): the official Sapiens
person detector from the model registry, its weights downloaded from a
loopback stand-in for the Hub and run by mmdet with the shipped config."""
import io

import numpy as np
import pytest
import torch
from fake_hub import FakeHub

from sapiens_mm.detection.person_detector import (
    MMDetPersonDetector,
    build_person_detector,
)
from sapiens_mm.zoo import find_card


def test_rtmdet_m_by_name_downloads_and_runs(tmp_path, monkeypatch):
    mmdet_apis = pytest.importorskip('mmdet.apis')
    card = find_card('rtmdet-m')
    model = mmdet_apis.init_detector(str(card.config), None, device='cpu')
    buffer = io.BytesIO()  # random weights, fp16 to keep the file small
    torch.save({'state_dict': {k: v.half() if v.is_floating_point() else v
                               for k, v in model.state_dict().items()}},
               buffer)
    with FakeHub() as hub:
        monkeypatch.setenv('HF_ENDPOINT', hub.endpoint)
        monkeypatch.setenv('HF_HUB_CACHE', str(tmp_path / 'hf-cache'))
        monkeypatch.delenv('HF_HUB_OFFLINE', raising=False)
        hub.add_file(card.repo_id, card.filename, buffer.getvalue())
        detector = build_person_detector('sapiens-pose-bbox-detector')
        assert len(hub.downloads(card.filename)) == 1
    assert isinstance(detector, MMDetPersonDetector)
    assert detector.describe()['checkpoint'].endswith(card.filename)
    boxes, scores = detector(np.zeros((64, 48, 3), np.uint8))
    assert boxes.shape[1:] == (4, ) and scores.shape == boxes.shape[:1]
    with pytest.raises(ValueError, match='rtmdet-m'):
        build_person_detector('rtmdet-x')
