"""Video through the inferencer and its CLI: track IDs in the JSON, One-Euro
smoothing, the detector every N frames, dense stabilisation.

A tiny pose model with random weights and a 20-frame video written here
with ``cv2.VideoWriter``.
"""
import json

import cv2
import numpy as np
import pytest
import torch

from sapiens_mm.apis import SapiensInferencer
from sapiens_mm.cli.infer import main
from inference_helpers import image, small_cfg

FRAMES, FPS = 20, 10.0


@pytest.fixture(scope='module', autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope='module')
def video(tmp_path_factory):
    """A bright square (the "person") sliding over a textured background."""
    path = tmp_path_factory.mktemp('video') / 'walk.mp4'
    w, h = 96, 64
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*'mp4v'), FPS,
                             (w, h))
    assert writer.isOpened()
    for i in range(FRAMES):
        frame = image(h, w, 0)
        x = 10 + 3 * i
        frame[15:55, x:x + 20] = 230
        writer.write(frame)
    writer.release()
    return path


@pytest.fixture(scope='module')
def pose_cfg(tmp_path_factory):
    path = tmp_path_factory.mktemp('cfg') / 'pose_small.py'
    cfg = small_cfg('pose')
    cfg.model.test_cfg.flip_test = False  # the fake head below has no flip
    cfg.dump(str(path))
    return path


@pytest.fixture
def square_finder(monkeypatch):
    """A pose model that finds the bright square of its crop: its K
    keypoints are spread over the square's extent (heatmap peaks there),
    like a real model's on a person."""
    from mmpose.models import TopdownPoseEstimator

    from sapiens_mm.models.heads import SapiensHeatmapHead
    hm_h, hm_w = 16, 12
    rng = np.random.default_rng(0)
    u, v = (torch.from_numpy(rng.uniform(0, 1, 308)).float()
            for _ in range(2))

    def head(self, feats):
        x = feats[-1].sum(1)  # (N, h, w) crop brightness
        n, h, w = x.shape
        out = []
        for img in x:
            ys, xs = torch.nonzero(img >= 0.9 * img.max(), as_tuple=True)
            # crop pixel -> heatmap pixel (UDP: corners to corners)
            x0, x1 = (t * (hm_w - 1) / (w - 1) for t in (xs.min(), xs.max()))
            y0, y1 = (t * (hm_h - 1) / (h - 1) for t in (ys.min(), ys.max()))
            kx, ky = x0 + (x1 - x0) * u, y0 + (y1 - y0) * v
            gy, gx = torch.meshgrid(torch.arange(hm_h).float(),
                                    torch.arange(hm_w).float(), indexing='ij')
            out.append(torch.exp(-((gx - kx[:, None, None])**2 +
                                   (gy - ky[:, None, None])**2) / 2))
        return torch.stack(out)

    monkeypatch.setattr(TopdownPoseEstimator, 'extract_feat',
                        lambda self, inputs: (inputs, ))
    monkeypatch.setattr(SapiensHeatmapHead, 'forward', head)


def _frames_json(out_dir):
    files = sorted((out_dir / 'pose' / 'walk').glob('*.json'))
    return [json.loads(f.read_text()) for f in files]


def test_cli_video_tracking_and_smoothing(video, pose_cfg, square_finder,
                                          tmp_path):
    common = [str(video), '--pose-config', str(pose_cfg), '--detector',
              'none', '--device', 'cpu', '--no-progress', '--batch-size', '3']
    main(common + ['--out-dir', str(tmp_path / 'on'), '--det-interval', '4'])
    frames = _frames_json(tmp_path / 'on')
    assert [f['frame_index'] for f in frames] == list(range(FRAMES))
    # One person all along: one ID, the same in every frame.
    ids = [[inst['track_id'] for inst in f['instances']] for f in frames]
    assert ids == [[0]] * FRAMES
    # The detector ran on frames 0, 4, 8, ...; the others took their box
    # from the previous frame's keypoints: the square (20 x 40 px, at
    # x = 10 + 3 i) enlarged by 1.25, so it follows the square.
    sources = [f['instances'][0]['bbox_source'] for f in frames]
    assert sources == ['whole_image' if i % 4 == 0 else 'keypoints'
                       for i in range(FRAMES)]
    for i, f in enumerate(frames):
        if i % 4 == 0:
            continue
        x1, y1, x2, y2 = f['instances'][0]['bbox']
        x, y, w, h = x1, y1, x2 - x1, y2 - y1
        square_x = 10 + 3 * (i - 1)  # where the previous frame saw it
        # 3 px: the crop -> heatmap -> image round trip of the square's
        # edges (a heatmap pixel is ~ 2 image pixels here) and the motion
        assert abs(x + w / 2 - (square_x + 10)) < 3
        assert 15 < w < 35  # about the square's 20 px, times 1.25
        assert abs(y + h / 2 - 35) < 3

    main(common + ['--out-dir', str(tmp_path / 'off'), '--det-interval', '4',
                   '--no-smooth'])
    raw = _frames_json(tmp_path / 'off')
    smoothed = [np.array(f['instances'][0]['keypoints']) for f in frames]
    unsmoothed = [np.array(f['instances'][0]['keypoints']) for f in raw]
    # The first frame passes the filter unchanged; later ones are filtered.
    np.testing.assert_allclose(smoothed[0], unsmoothed[0], atol=1e-4)
    assert max(np.abs(a - b).max()
               for a, b in zip(smoothed[1:], unsmoothed[1:])) > 0.1
    # the visualisation is a video of all frames
    cap = cv2.VideoCapture(str(tmp_path / 'on' / 'pose' / 'walk.mp4'))
    n = 0
    while cap.read()[0]:
        n += 1
    assert n == FRAMES


def test_cli_video_tiny_model(video, pose_cfg, tmp_path):
    """The tiny model itself (random weights, no fake head): the whole
    frame is the person's box in every frame, so one ID all along."""
    main([str(video), '--pose-config', str(pose_cfg), '--detector', 'none',
          '--device', 'cpu', '--no-progress', '--no-save-vis', '--out-dir',
          str(tmp_path)])
    frames = _frames_json(tmp_path)
    assert len(frames) == FRAMES
    assert [[i['track_id'] for i in f['instances']] for f in frames] == \
        [[0]] * FRAMES


def test_images_are_not_tracked_or_smoothed(pose_cfg):
    torch.manual_seed(0)
    inferencer = SapiensInferencer({'pose': str(pose_cfg)}, device='cpu',
                                   detector='none')
    (res, ) = inferencer(image(64, 48, 1))
    assert 'track_ids' not in res['predictions']['pose']
    # the pose head decodes with the batched decoder
    from sapiens_mm.codecs import BatchUDPHeatmap
    head = inferencer.task_inferencers['pose'].model.head
    assert isinstance(head.decoder, BatchUDPHeatmap)
    with pytest.raises(ValueError, match='det_interval'):
        SapiensInferencer({'pose': str(pose_cfg)}, device='cpu',
                          det_interval=0)
    with pytest.raises(ValueError, match='tracker_cfg'):
        SapiensInferencer({'pose': str(pose_cfg)}, device='cpu',
                          tracker_cfg=dict(speed=1))


def test_dense_stabilised_on_video(video):
    """With stabilize_dense the first depth frame passes unchanged and the
    second is the average of the first and of the second mapped onto the
    first by the symmetric least-squares line (closed form: scale =
    std(first) / std(second)); normals stay unit vectors."""
    torch.manual_seed(0)
    cfgs = {t: small_cfg(t) for t in ('depth', 'normal')}
    plain = SapiensInferencer(cfgs, device='cpu')
    stab = SapiensInferencer(cfgs, device='cpu', stabilize_dense=True,
                             stabilize_alpha=0.5)
    for task in cfgs:
        stab.models[task].load_state_dict(plain.models[task].state_dict())
    a = plain(str(video), max_frames=3)
    b = stab(str(video), max_frames=3)
    d0, d1 = (a[i]['predictions']['depth'].astype(np.float64)
              for i in (0, 1))
    np.testing.assert_allclose(b[0]['predictions']['depth'], d0, rtol=1e-6)
    scale = d0.std() / d1.std()
    expected = 0.5 * (scale * d1 + d0.mean() - scale * d1.mean()) + 0.5 * d0
    np.testing.assert_allclose(b[1]['predictions']['depth'], expected,
                               rtol=1e-5)
    assert not np.allclose(b[2]['predictions']['depth'],
                           a[2]['predictions']['depth'])
    n = b[2]['predictions']['normal']
    np.testing.assert_allclose(np.linalg.norm(n, axis=-1), 1.0, atol=1e-5)
