"""Person boxes given for every image (``--bboxes``) make the detector
unneeded: none is built, and ``--detector auto`` (the default, which looks
for RTMDet-m's weights on the Hub) touches no network. An image the boxes
do not cover still gets the detector."""
import json

import cv2
import numpy as np
import torch
from attack_helpers import changed, tree_state
from fake_hub import FakeHub
from mmengine.config import Config

from sapiens_mm.apis.inference import init_model, set_input_size
from sapiens_mm.apis.inferencers import pose_inferencer
from sapiens_mm.checkpoint.config_data import config_to_data
from sapiens_mm.detection import person_detector
from tiny_configs import TINY
from tool_helpers import load_tool


def test_bboxes_build_no_detector_and_reach_no_hub(tmp_path, monkeypatch):
    cfg = set_input_size(Config.fromfile(str(TINY['pose'])), (64, 48))
    ckpt = tmp_path / 'pose.pth'
    torch.save(dict(meta=dict(config_data=config_to_data(cfg)),
                    state_dict=init_model(cfg).state_dict()), ckpt)
    img = tmp_path / 'img.png'
    cv2.imwrite(str(img), np.full((60, 40, 3), 90, np.uint8))
    boxes = tmp_path / 'boxes.json'
    boxes.write_text(json.dumps([[4, 4, 30, 50]]))
    built = []
    real = pose_inferencer.build_person_detector
    monkeypatch.setattr(pose_inferencer, 'build_person_detector',
                        lambda *a: built.append(a) or real(*a))
    # mmdet runs here, so 'auto' asks the Hub for RTMDet-m
    monkeypatch.setattr(person_detector, 'mmdet_import_error', lambda: None)
    infer = load_tool('infer')
    with FakeHub() as hub:
        monkeypatch.setenv('HF_ENDPOINT', hub.endpoint)
        monkeypatch.setenv('HF_HUB_CACHE', str(tmp_path / 'hf-cache'))
        monkeypatch.delenv('HF_HUB_OFFLINE', raising=False)
        before = tree_state(tmp_path, skip=[tmp_path / 'out'])
        infer.cli([str(img), '--pose', str(ckpt), '--bboxes', str(boxes),
                   '--out-dir', str(tmp_path / 'out'), '--no-progress',
                   '--device', 'cpu'], prog='infer')
        assert built == [] and hub.requests == []
        assert changed(before, tree_state(tmp_path,
                                          skip=[tmp_path / 'out'])) == {}
        record = json.loads((tmp_path / 'out/pose/img.json').read_text())
        assert [i['bbox_source'] for i in record['instances']] == ['user']
        # without boxes the detector is built when the image needs it, and
        # 'auto' asks the Hub (so the assertions above can fail)
        infer.cli([str(img), '--pose', str(ckpt), '--out-dir',
                   str(tmp_path / 'out2'), '--no-progress', '--device',
                   'cpu'], prog='infer')
        assert len(built) == 1 and hub.requests
