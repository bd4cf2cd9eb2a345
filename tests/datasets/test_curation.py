"""Person-image curation: keeps people, drops the rest, resumes."""
import importlib.util
import json
import shutil
import sys
import types
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from skimage import data

from sapiens_mm.datasets.curation import (
    DECISIONS_NAME,
    Detection,
    curate_images,
    detect,
)
from sapiens_mm.detection import (
    MMDetPersonDetector,
    OpenCVFaceDetector,
    build_person_detector,
)
from sapiens_mm.datasets.unlabeled_image_dataset import UnlabeledImageDataset

ROOT = Path(__file__).resolve().parents[2]


class CountingDetector:
    """Wraps a detector and records the images it ran on."""

    def __init__(self, detector=None):
        self.detector = detector or OpenCVFaceDetector()
        self.default_score_thr = self.detector.default_score_thr
        self.default_min_box_size = self.detector.default_min_box_size
        self.calls = 0

    def describe(self):
        return self.detector.describe()

    def __call__(self, img):
        self.calls += 1
        return self.detector(img)


def bgr(rgb_or_gray):
    img = rgb_or_gray
    if img.ndim == 2:
        return img
    return cv2.cvtColor(img, cv2.COLOR_RGB2BGR)


@pytest.fixture(scope='module')
def photo_dir(tmp_path_factory):
    """scikit-image's bundled pictures (no download): one person, three
    without people, a small copy of the person, and a corrupt file."""
    root = tmp_path_factory.mktemp('photos')
    (root / 'people').mkdir()
    (root / 'scenes').mkdir()
    cv2.imwrite(str(root / 'people' / 'astronaut.png'), bgr(data.astronaut()))
    small = cv2.resize(bgr(data.astronaut()), (256, 256),
                       interpolation=cv2.INTER_AREA)
    cv2.imwrite(str(root / 'people' / 'astronaut_small.jpg'), small)
    cv2.imwrite(str(root / 'scenes' / 'coffee.jpg'), bgr(data.coffee()))
    cv2.imwrite(str(root / 'scenes' / 'brick.png'), data.brick())
    cv2.imwrite(str(root / 'scenes' / 'grass.webp'), data.grass())
    (root / 'scenes' / 'corrupt.jpg').write_bytes(b'\xff\xd8\xff garbage')
    return root


@pytest.fixture(scope='module')
def decided(photo_dir, tmp_path_factory):
    """Output folder of one complete curation run over ``photo_dir``."""
    out = tmp_path_factory.mktemp('decided') / 'cur'
    det = CountingDetector()
    report = curate_images(str(photo_dir), str(out), det, progress=False)
    return out, det, report


@pytest.mark.slow
def test_builtin_detector_finds_the_astronaut_only():
    det = OpenCVFaceDetector()
    found = detect(det, bgr(data.astronaut()))
    assert len(found) == 1
    assert found[0].score >= det.default_score_thr
    x1, y1, x2, y2 = found[0].bbox
    # The face is in the upper middle of the picture.
    assert 150 < (x1 + x2) / 2 < 300 and 50 < (y1 + y2) / 2 < 200
    assert found[0].size >= det.default_min_box_size
    for name in ('coffee', 'brick', 'grass', 'chelsea'):
        img = getattr(data, name)()
        img = bgr(img) if img.ndim == 3 else cv2.cvtColor(
            img, cv2.COLOR_GRAY2BGR)
        assert all(d.score < det.default_score_thr
                   for d in detect(det, img)), name


def test_curation_keeps_people_and_resumes(photo_dir, decided, tmp_path):
    out = tmp_path / 'cur'
    shutil.copytree(decided[0], out)
    det, report = decided[1:]
    assert (report.total, report.kept, report.dropped,
            report.unreadable) == (6, 1, 4, 1)
    assert det.calls == 5 and report.detected == 6 and report.reused == 0
    manifest = (out / 'manifest.txt').read_text().splitlines()
    assert [m for m in manifest if not m.startswith('#')] == [
        'people/astronaut.png'
    ]
    saved = json.loads((out / 'report.json').read_text())
    assert (saved['kept'], saved['dropped'], saved['unreadable']) == (1, 4, 1)
    assert saved['score_thr'] == 15 and saved['min_box_size'] == 64

    # The dataset reads the manifest.
    ds = UnlabeledImageDataset(data_root=str(photo_dir),
                               ann_file=str(out / 'manifest.txt'),
                               pipeline=[dict(type='mmpretrain.PackInputs')])
    assert len(ds) == 1 and ds[0]['inputs'].shape == (3, 512, 512)

    # Second run: nothing is detected again, same outcome.
    det = CountingDetector()
    again = curate_images(str(photo_dir), str(out), det, progress=False)
    assert det.calls == 0 and again.reused == 6 and again.detected == 0
    assert (again.kept, again.dropped, again.unreadable) == (1, 4, 1)

    # New thresholds are applied to the stored detections: the small
    # astronaut (a ~50 px face) passes a 40 px limit, without re-detection.
    again = curate_images(str(photo_dir), str(out), det, min_box_size=40,
                          progress=False)
    assert det.calls == 0 and again.kept == 2

    # A new image: only that one is detected.
    cv2.imwrite(str(photo_dir / 'scenes' / 'new.png'),
                np.full((64, 64, 3), 128, np.uint8))
    try:
        curate_images(str(photo_dir), str(out), det, progress=False)
        assert det.calls == 1
    finally:
        (photo_dir / 'scenes' / 'new.png').unlink()


def test_interrupted_run_continues(photo_dir, decided, tmp_path):
    out = tmp_path / 'cur'
    shutil.copytree(decided[0], out)
    lines = (out / DECISIONS_NAME).read_text().splitlines()
    # Keep three decisions and half of a fourth, as after a crash.
    (out / DECISIONS_NAME).write_text('\n'.join(lines[:3]) + '\n' +
                                      lines[3][:15])
    det = CountingDetector()
    report = curate_images(str(photo_dir), str(out), det, progress=False)
    redo = [json.loads(line)['path'] for line in lines[3:]]
    assert 'scenes/corrupt.jpg' in redo  # not given to the detector
    assert det.calls == len(redo) - 1 and report.reused == 3
    assert (report.kept, report.dropped, report.unreadable) == (1, 4, 1)
    # The records written after the cut line are all readable.
    det = CountingDetector()
    report = curate_images(str(photo_dir), str(out), det, progress=False)
    assert det.calls == 0 and report.reused == 6


class NoDetections:
    """A cheap stand-in detector with other settings."""
    calls = 0

    def describe(self):
        return dict(name='none')

    def __call__(self, img):
        self.calls += 1
        return np.zeros((0, 4), np.float32), np.zeros(0, np.float32)


def test_restart_and_detector_mismatch(photo_dir, decided, tmp_path):
    out = tmp_path / 'cur'
    shutil.copytree(decided[0], out)
    other = NoDetections()
    with pytest.raises(ValueError, match='--restart'):
        curate_images(str(photo_dir), str(out), other, progress=False)
    assert other.calls == 0
    report = curate_images(str(photo_dir), str(out), other, restart=True,
                           progress=False)
    assert other.calls == 5 and report.reused == 0 and report.kept == 0


def test_mmdet_detector_uses_person_boxes(monkeypatch, tmp_path):
    from mmengine.structures import InstanceData

    class Result:
        pred_instances = InstanceData(
            bboxes=torch.tensor([[0., 0., 100., 400.], [0., 0., 100., 200.],
                                 [0., 0., 500., 500.]]),
            scores=torch.tensor([0.95, 0.99, 0.99]),
            labels=torch.tensor([0, 0, 2]))

    fake = types.ModuleType('mmdet.apis')
    fake.init_detector = lambda config, checkpoint, device: 'model'
    fake.inference_detector = lambda model, img: Result()
    monkeypatch.setitem(sys.modules, 'mmdet.apis', fake)
    cfg, ckpt = tmp_path / 'det.py', tmp_path / 'det.pth'
    cfg.write_text('')
    ckpt.write_bytes(b'')
    det = build_person_detector('face', str(cfg), str(ckpt))
    assert isinstance(det, MMDetPersonDetector)
    assert (det.default_score_thr, det.default_min_box_size) == (0.9, 300)
    found = detect(det, np.zeros((8, 8, 3), np.uint8))
    assert found == [Detection((0., 0., 100., 200.), pytest.approx(0.99)),
                     Detection((0., 0., 100., 400.), pytest.approx(0.95))]
    root = tmp_path / 'imgs'
    root.mkdir()
    cv2.imwrite(str(root / 'a.png'), np.zeros((8, 8, 3), np.uint8))
    report = curate_images(str(root), detector=det, progress=False)
    assert report.kept == 1  # the 400 px person box with score 0.95
    report = curate_images(str(root), detector=det, score_thr=0.96,
                           progress=False)
    assert report.kept == 0  # the 0.99 box is only 200 px: too small
    spec = importlib.util.spec_from_file_location(
        'curate_images', ROOT / 'tools' / 'curate_images.py')
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    with pytest.raises(SystemExit):  # the CLI needs both files
        tool.parse_args([str(root), '--det-model', str(cfg)])


def test_cli(photo_dir, decided, tmp_path, capsys):
    spec = importlib.util.spec_from_file_location(
        'curate_images', ROOT / 'tools' / 'curate_images.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path / 'cli'
    shutil.copytree(decided[0], out)
    module.main([str(photo_dir), '--out-dir', str(out), '--no-progress',
                 '--min-box-size', '40'])
    assert '2 kept, 3 dropped, 1 unreadable' in capsys.readouterr().out
    kept = (out / 'manifest.txt').read_text()
    assert 'people/astronaut.png' in kept
    assert 'people/astronaut_small.jpg' in kept


@pytest.mark.slow
def test_two_processes_keep_what_one_process_keeps(photo_dir, decided,
                                                  tmp_path):
    """tools/dist_infer.sh runs the curation tool on 2 processes (gloo):
    the same manifest.txt and counts as the single-process run, one merged
    record per image."""
    import subprocess
    from cluster_helpers import free_port, run_env
    ref_out, _, ref = decided
    out = tmp_path / 'cur2'
    env = dict(run_env(tmp_path), PYTHON=sys.executable,
               PORT=str(free_port()))
    proc = subprocess.run(
        ['bash', str(ROOT / 'tools' / 'dist_infer.sh'), '2',
         str(ROOT / 'tools' / 'curate_images.py'), str(photo_dir),
         '--out-dir', str(out), '--no-progress'],
        env=env, cwd=str(ROOT), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (out / 'manifest.txt').read_text() == \
        (ref_out / 'manifest.txt').read_text()
    assert ref.kept >= 1 and ref.dropped >= 1 and ref.unreadable == 1
    report = json.loads((out / 'report.json').read_text())
    for key in ('total', 'kept', 'dropped', 'unreadable'):
        assert report[key] == getattr(ref, key), key
    records = [json.loads(line) for line in
               (out / 'manifest.jsonl').read_text().splitlines()]
    names = [r['name'] for r in records]
    assert len(names) == len(set(names)) == ref.total
    assert set(names) == {
        json.loads(line)['path'] for line in
        (ref_out / DECISIONS_NAME).read_text().splitlines()}
