"""Inference on careless input: outputs never overwrite each other or end up
truncated, truncated images and bad boxes are reported, corrupt weights are
refused or their outputs flagged, and the CLI ends every user error with
one line and a non-zero exit (before the model runs where it can).

A tiny seg model at 64x48 with random weights; the CLI runs in-process
through :func:`sapiens_mm.cli.infer.cli` (what tools/infer.py and
``python -m sapiens_mm`` call)."""
import errno
import json
import os

import cv2
import numpy as np
import pytest
import torch

from cluster_helpers import simulate_full_disk

from sapiens_mm.apis import SapiensInferencer
from sapiens_mm.cli.infer import cli
from sapiens_mm.detection import boxes_per_input, check_boxes
from sapiens_mm.utils.image_io import truncation_problem
from inference_helpers import image, small_cfg


@pytest.fixture(scope='module')
def seg_files(tmp_path_factory):
    """The small seg config on disk and a checkpoint of its weights."""
    from sapiens_mm.apis import init_model
    folder = tmp_path_factory.mktemp('seg')
    cfg = small_cfg('seg')
    cfg.model.backbone.init_cfg = None
    cfg_path = folder / 'seg_small.py'
    cfg.dump(str(cfg_path))
    torch.manual_seed(0)
    model = init_model(str(cfg_path))
    ckpt = folder / 'seg_small.pth'
    torch.save({'state_dict': model.state_dict()}, str(ckpt))
    return str(cfg_path), str(ckpt), model.state_dict()


@pytest.fixture(scope='module')
def seg(seg_files):
    return SapiensInferencer(models={'seg': seg_files[:2]}, device='cpu')


def _cli_error(capsys, *argv):
    with pytest.raises(SystemExit) as exc:
        cli(list(argv), prog='infer')
    msg = str(exc.value.code)
    assert exc.value.code not in (0, None)
    assert '\n' not in msg and 'Traceback' not in capsys.readouterr().err
    return msg


def test_same_stem_inputs_get_distinct_outputs(seg, seg_files, tmp_path):
    folder = tmp_path / 'in'
    folder.mkdir()
    imgs = {'x.jpg': image(40, 30, 1), 'x.png': image(40, 30, 2),
            'x_1.png': image(40, 30, 3)}
    for name, img in imgs.items():
        cv2.imwrite(str(folder / name), img)
    out = tmp_path / 'out'
    results = seg(str(folder), out_dir=str(out), show_progress=False)
    names = {os.path.basename(r['input']): r['name'] for r in results}
    assert names == {'x.jpg': 'x', 'x.png': 'x_2', 'x_1.png': 'x_1'}
    for r in results:  # every result is in its own file, not overwritten
        saved = np.load(r['pred_files']['seg'])
        np.testing.assert_array_equal(saved, r['predictions']['seg'])
    assert len({r['pred_files']['seg'] for r in results}) == 3
    # the CLI records which input each output came from
    cfg, ckpt, _ = seg_files
    cli([str(folder), '--seg-config', cfg, '--seg', ckpt, '--out-dir',
         str(tmp_path / 'cli'), '--no-progress'])
    mapping = json.loads((tmp_path / 'cli' / 'outputs.json').read_text())
    assert {os.path.basename(r['input']): r['name']
            for r in mapping} == names


def test_full_disk_leaves_no_truncated_output(seg, tmp_path, monkeypatch):
    img = tmp_path / 'a.png'
    cv2.imwrite(str(img), image(40, 30, 4))
    simulate_full_disk(monkeypatch)
    out = tmp_path / 'out'
    with pytest.raises(OSError) as err:
        seg(str(img), out_dir=str(out), show_progress=False)
    assert err.value.errno == errno.ENOSPC
    assert str(out / 'seg' / 'a.npy') in str(err.value)
    assert [f for _, _, files in os.walk(out) for f in files] == []


def test_video_is_renamed_only_when_complete(tmp_path):
    from sapiens_mm.apis.inferencers.utils import VideoWriters
    from inference_helpers import count_frames as _count_frames
    final = tmp_path / 'vis' / 'clip.mp4'
    videos = VideoWriters()
    for i in range(3):
        videos.write(0, 'seg', str(final), image(48, 64, i), fps=5.0)
    # while frames are still coming, nothing stands under the final name:
    # the frames go to a private hidden folder beside it
    assert not final.exists()
    (private, ) = os.listdir(final.parent)
    assert private.startswith('.clip.tmp')
    assert os.stat(final.parent / private).st_mode & 0o077 == 0
    videos.release()
    assert os.listdir(final.parent) == ['clip.mp4']
    assert _count_frames(final)[0] == 3
    # a failed run: the temporary file goes, an earlier video is kept
    for i in range(2):
        videos.write(1, 'seg', str(final), image(48, 64, i), fps=5.0)
    videos.discard()
    assert os.listdir(final.parent) == ['clip.mp4']
    assert _count_frames(final)[0] == 3


def test_video_never_writes_through_a_planted_link(tmp_path):
    """A symlink planted under the temporary name the writer used to
    choose (``.<stem>.tmp<pid>.mp4``) leaves its target untouched."""
    from sapiens_mm.apis.inferencers.utils import VideoWriters
    victim = tmp_path / 'victim.txt'
    victim.write_bytes(b'precious')
    out = tmp_path / 'vis'
    out.mkdir()
    (out / f'.clip.tmp{os.getpid()}.mp4').symlink_to(victim)
    videos = VideoWriters()
    for i in range(2):
        videos.write(0, 'seg', str(out / 'clip.mp4'), image(48, 64, i),
                     fps=5.0)
    videos.release()
    assert victim.read_bytes() == b'precious'
    assert (out / 'clip.mp4').stat().st_size > 0


def test_full_disk_during_a_video_leaves_no_video(seg, tmp_path,
                                                   monkeypatch):
    # the module that writes each frame's files
    import sapiens_mm.apis.inferencers.frame_outputs as inf
    from inference_helpers import write_video as _write_video
    _write_video(tmp_path / 'clip.mp4', 4)
    real_write_npy, calls = inf.write_npy, []

    def disk_full_at_third_frame(path, arr):
        calls.append(path)
        if len(calls) == 3:  # the video already has frames by now
            raise OSError(errno.ENOSPC, 'No space left on device', path)
        real_write_npy(path, arr)

    monkeypatch.setattr(inf, 'write_npy', disk_full_at_third_frame)
    out = tmp_path / 'out'
    with pytest.raises(OSError) as err:
        seg(str(tmp_path / 'clip.mp4'), out_dir=str(out), batch_size=2,
            show_progress=False)
    assert err.value.errno == errno.ENOSPC
    files = sorted(f for _, _, fs in os.walk(out) for f in fs)
    # the two complete frames' arrays stay; the overlay video, which
    # would be truncated, is left under no name (final or temporary)
    assert files == ['000000.npy', '000001.npy']


def _jpeg(img):
    ok, buf = cv2.imencode('.jpg', img)
    assert ok
    return buf.tobytes()


def test_truncated_jpeg_is_skipped_with_a_message(seg, tmp_path, capsys):
    full = _jpeg(image(64, 48, 5))
    assert truncation_problem(full) is None
    half = full[:len(full) // 2]
    # OpenCV alone decodes it without a word (the lower rows come out flat)
    assert cv2.imdecode(np.frombuffer(half, np.uint8), 1) is not None
    assert 'truncated' in truncation_problem(half)
    (tmp_path / 'half.jpg').write_bytes(half)
    (tmp_path / 'good.jpg').write_bytes(full)
    results = seg([str(tmp_path / 'half.jpg'), str(tmp_path / 'good.jpg')],
                  out_dir=str(tmp_path / 'out'), show_progress=False)
    assert [r['name'] for r in results] == ['good']
    assert len(seg.skipped) == 1 and 'truncated' in seg.skipped[0][1]
    # a PNG cut short too
    ok, png = cv2.imencode('.png', image(64, 48, 6))
    assert 'truncated' in truncation_problem(png.tobytes()[:-20])
    assert truncation_problem(png.tobytes()) is None


def test_run_where_every_input_fails_exits_non_zero(seg_files, tmp_path,
                                                    capsys):
    cfg, ckpt, _ = seg_files
    full = _jpeg(image(64, 48, 7))
    (tmp_path / 'half.jpg').write_bytes(full[:len(full) // 2])
    (tmp_path / 'junk.png').write_bytes(b'not a png')
    msg = _cli_error(capsys, str(tmp_path / 'half.jpg'),
                     str(tmp_path / 'junk.png'), '--seg-config', cfg,
                     '--seg', ckpt, '--out-dir', str(tmp_path / 'o'),
                     '--no-progress')
    assert 'No input could be processed (2 skipped' in msg
    assert 'half.jpg' in msg and 'truncated' in msg


@pytest.mark.parametrize('box,why', [
    ([30, 10, 10, 40], 'inverted'),
    ([10, 10, 10, 40], 'zero area'),
    ([10, float('nan'), 20, 40], 'non-finite'),
])
def test_invalid_user_boxes_are_errors_naming_the_box(box, why, seg_files,
                                                      tmp_path, capsys):
    with pytest.raises(ValueError, match=why) as err:
        boxes_per_input([[0, 0, 20, 30], box], 2)
    assert 'box 1' in str(err.value)
    with pytest.raises(ValueError, match=why):
        boxes_per_input([None, [box]], 2)  # one list per input
    np.testing.assert_array_equal(check_boxes([1, 2, 3, 4]),
                                  [[1, 2, 3, 4]])
    # through the CLI: one line naming the box
    cfg, ckpt, _ = seg_files
    img = tmp_path / 'a.png'
    cv2.imwrite(str(img), image(40, 30, 8))
    msg = _cli_error(capsys, str(img), '--seg-config', cfg, '--seg', ckpt,
                     '--bboxes', json.dumps([box]),
                     '--out-dir', str(tmp_path / 'o'))
    assert why in msg and 'box 0' in msg


def test_malformed_bboxes_file_is_named(seg_files, tmp_path, capsys):
    cfg, ckpt, _ = seg_files
    img = tmp_path / 'a.png'
    cv2.imwrite(str(img), image(40, 30, 9))
    bad = tmp_path / 'boxes.json'
    bad.write_text('[[1, 2, 3, 4]')
    msg = _cli_error(capsys, str(img), '--seg-config', cfg, '--seg', ckpt,
                     '--bboxes', str(bad), '--out-dir', str(tmp_path / 'o'))
    assert str(bad) in msg and 'not valid JSON' in msg


def test_unwritable_out_dir_is_reported_before_the_model_is_built(
        tmp_path, capsys):
    blocker = tmp_path / 'a_file'
    blocker.write_text('')
    img = tmp_path / 'a.png'
    cv2.imwrite(str(img), image(40, 30, 10))
    # a released model not in the (offline, empty) cache: the out-dir check
    # comes before its download would be tried
    msg = _cli_error(capsys, str(img), '--seg', 'sapiens2-seg-0.4b',
                     '--out-dir', str(blocker / 'out'))
    assert 'Cannot write to the output folder (--out-dir)' in msg
    assert str(blocker / 'out') in msg


def test_nan_weights_are_refused_naming_the_tensor(seg_files, tmp_path,
                                                   capsys):
    cfg, _, state = seg_files
    bad = {k: v.clone() for k, v in state.items()}
    bad['decode_head.conv_seg.weight'][0, 0] = float('nan')
    ckpt = tmp_path / 'nan.pth'
    torch.save({'state_dict': bad}, str(ckpt))
    img = tmp_path / 'a.png'
    cv2.imwrite(str(img), image(40, 30, 11))
    msg = _cli_error(capsys, str(img), '--seg-config', cfg, '--seg',
                     str(ckpt), '--out-dir', str(tmp_path / 'o'))
    assert 'decode_head.conv_seg.weight (1 of' in msg and 'NaN' in msg


def test_non_finite_outputs_are_flagged(seg_files, tmp_path, caplog):
    """Finite but huge weights (what a flipped exponent bit gives) make the
    logits overflow: the frame is flagged and logged."""
    cfg, _, state = seg_files
    huge = {k: v.clone() for k, v in state.items()}
    huge['decode_head.conv_seg.weight'].fill_(3e38)
    ckpt = tmp_path / 'huge.pth'
    torch.save({'state_dict': huge}, str(ckpt))
    inferencer = SapiensInferencer(models={'seg': (cfg, str(ckpt))},
                                   device='cpu')
    img = tmp_path / 'a.png'
    cv2.imwrite(str(img), image(40, 30, 12))
    (res, ) = inferencer(str(img), no_save_pred=True, no_save_vis=True,
                         show_progress=False)
    assert res['nonfinite']['seg'] > 0
    ok = SapiensInferencer(models={'seg': (cfg, seg_files[1])},
                           device='cpu')
    (res, ) = ok(str(img), no_save_pred=True, no_save_vis=True,
                 show_progress=False)
    assert res['nonfinite'] == {}
