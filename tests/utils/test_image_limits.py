"""Decompression bombs and extreme shapes are refused from the header,
before anything is decoded: images (the one reader), video and webcam
frame sizes, the CLI and the web demo; the limits are configurable."""
import os
import struct
import zlib

import cv2
import numpy as np
import pytest
from attack_helpers import (changed, run_measured, tiff_two_sizes,
                            tree_state)
from log_helpers import logged_warnings

from sapiens_mm.apis.inferencers.utils.sources import (collect_sources,
                                                       iter_frames)
from sapiens_mm.demo.web import WebDemo
from sapiens_mm.utils.image_io import (ImageTooLargeError,
                                       UnreadableImageError, read_image)
from tiny_configs import ROOT, TINY
from tool_helpers import load_tool


def _png(path, width, height):
    """A valid RGB PNG of zeros; its IDAT is compressed row by row, so a
    huge image costs little memory and a few hundred KB on disk."""

    def chunk(kind, data):
        return struct.pack('>I', len(data)) + kind + data + struct.pack(
            '>I', zlib.crc32(kind + data) & 0xffffffff)

    comp, row = zlib.compressobj(9), b'\0' * (1 + 3 * width)
    idat = b''.join(comp.compress(row) for _ in range(height)) + comp.flush()
    path.write_bytes(b'\x89PNG\r\n\x1a\n' + chunk(
        b'IHDR', struct.pack('>IIBBBBB', width, height, 8, 2, 0, 0, 0)) +
                     chunk(b'IDAT', idat) + chunk(b'IEND', b''))
    return str(path)


def test_bomb_is_refused_from_its_header(tmp_path, monkeypatch):
    """8000 x 8000 (64 MP, 192 MB decoded) in a ~190 KB file."""
    bomb = _png(tmp_path / 'bomb.png', 8000, 8000)
    for backend in ('pillow', 'cv2'):
        with pytest.raises(ImageTooLargeError,
                           match=r'8000 x 8000 = 64,000,000 pixels, over '
                           r'the limit of 50,000,000.*SAPIENS_MM_MAX_IMAGE'):
            read_image(bomb, backend=backend)
    # the limit is configurable: environment and argument
    small = _png(tmp_path / 'small.png', 120, 100)
    assert read_image(small).shape == (100, 120, 3)
    monkeypatch.setenv('SAPIENS_MM_MAX_IMAGE_PIXELS', '10000')
    with pytest.raises(ImageTooLargeError, match='12,000 pixels'):
        read_image(small)
    assert read_image(small, max_pixels=12000).shape == (100, 120, 3)
    monkeypatch.setenv('SAPIENS_MM_MAX_IMAGE_PIXELS', 'lots')
    with pytest.raises(ValueError, match="SAPIENS_MM_MAX_IMAGE_PIXELS='lots'"):
        read_image(small)


def test_extreme_aspect_ratio_is_refused(tmp_path, monkeypatch):
    strip = _png(tmp_path / 'strip.png', 1280, 1)
    with pytest.raises(ImageTooLargeError, match='aspect ratio of 1280:1'):
        read_image(strip)
    monkeypatch.setenv('SAPIENS_MM_MAX_ASPECT_RATIO', '2000')
    assert read_image(strip).shape == (1, 1280, 3)
    assert read_image(strip, max_aspect=1e4, backend='cv2').shape == \
        (1, 1280, 3)


def test_cli_skips_a_bomb_and_runs_the_rest(tmp_path, capsys):
    bomb = _png(tmp_path / 'bomb.png', 8000, 8000)
    ok = _png(tmp_path / 'ok.png', 48, 64)
    infer = load_tool('infer')
    summary = infer.cli([bomb, ok, '--seg-config', str(TINY['seg']),
                         '--out-dir', str(tmp_path / 'out'),
                         '--no-progress', '--device', 'cpu'], prog='infer')
    assert [r['name'] for r in summary] == ['ok']
    assert (tmp_path / 'out' / 'seg' / 'ok.npy').is_file()
    assert not (tmp_path / 'out' / 'seg' / 'bomb.npy').exists()
    # only the bomb: one line, exit code 1
    with pytest.raises(SystemExit) as exc:
        infer.cli([bomb, '--seg-config', str(TINY['seg']), '--out-dir',
                   str(tmp_path / 'out2'), '--device', 'cpu'],
                  prog='infer')
    assert 'bomb.png is 8000 x 8000' in str(exc.value.code)
    assert '\n' not in str(exc.value.code)


def test_web_demo_refuses_a_strip_before_building_a_model(tmp_path):
    demo = WebDemo(device='cpu', out_root=str(tmp_path / 'web'))
    strip = _png(tmp_path / 'strip.png', 1280, 1)
    overlay, files, status = demo.run(strip, None, ['seg'], {})
    assert overlay is None and files == []
    assert 'strip.png is 1280 x 1, an aspect ratio of 1280:1' in status
    overlay, files, status = demo.run(None, np.zeros((4, 400, 3), np.uint8),
                                      ['seg'], {})
    assert overlay is None and 'webcam snapshot is 400 x 4' in status
    # refused before a run folder was made or a model built
    assert not list((tmp_path / 'web').glob('run_*'))


def _video(path, frames, size=(64, 48), codec='mp4v'):
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*codec),
                             10.0, size)
    for i in range(frames):
        writer.write(np.full((size[1], size[0], 3), 20 * i, np.uint8))
    writer.release()
    return str(path)


def test_video_refused_by_frame_size(tmp_path, monkeypatch):
    clip = _video(tmp_path / 'clip.mp4', 3)
    monkeypatch.setenv('SAPIENS_MM_MAX_IMAGE_PIXELS', '3000')
    skipped = []
    frames = list(iter_frames(collect_sources([clip]), None,
                              lambda src, why: skipped.append(why)))
    assert frames == []
    assert len(skipped) == 1 and '64 x 48 = 3,072 pixels' in skipped[0]
    monkeypatch.delenv('SAPIENS_MM_MAX_IMAGE_PIXELS')
    assert len(list(iter_frames(collect_sources([clip]), None,
                                lambda src, why: skipped.append(why)))) == 3


def test_video_with_a_corrupt_tail_says_so(tmp_path):
    """An AVI cut in half: its header still declares 30 frames."""
    clip = tmp_path / 'clip.avi'
    _video(clip, 30, codec='MJPG')
    data = clip.read_bytes()
    clip.write_bytes(data[:len(data) // 2])
    with logged_warnings() as said:
        n = len(list(iter_frames(collect_sources([str(clip)]), None,
                                 lambda src, why: None)))
    assert 0 < n < 29
    assert any(f'only {n} of its 30 frames' in m for m in said)


@pytest.mark.parametrize('cam', [10**20, '100000000000000000000',
                                 'webcam:99999999999'])
def test_webcam_index_out_of_range(cam):
    with pytest.raises(ValueError, match='webcam index .* is out of range'):
        collect_sources(cam)


def test_unidentified_header_is_unreadable(tmp_path):
    f = tmp_path / 'x.png'
    f.write_bytes(b'not an image at all')
    with pytest.raises(UnreadableImageError,
                       match='x.png: unknown or corrupt image header'):
        read_image(str(f))


def test_tiff_with_its_size_twice_is_refused_in_bounded_memory(tmp_path):
    """Pillow reads the TIFF as 64 x 64, libtiff (OpenCV's decoder) as
    30000 x 30000 (2.5 GiB decoded): the size checked must be the size
    decoded. Refused in one line (both backends, the CLI, the web demo),
    and reading it costs no more memory than reading a 64 x 64 PNG."""
    tiff = tiff_two_sizes(tmp_path / 'twice.tif', 30000, 64)
    assert (tmp_path / 'twice.tif').stat().st_size < 300_000
    for backend in ('pillow', 'cv2'):
        with pytest.raises(UnreadableImageError, match='cannot decode '
                           '.*twice.tif') as err:
            read_image(tiff, backend=backend)
        assert '\n' not in str(err.value)
    infer = load_tool('infer')
    before = tree_state(tmp_path, skip=[tmp_path / 'out'])
    with pytest.raises(SystemExit) as exc:
        infer.cli([tiff, '--seg-config', str(TINY['seg']), '--out-dir',
                   str(tmp_path / 'out'), '--device', 'cpu'], prog='infer')
    msg = str(exc.value.code)
    assert 'twice.tif' in msg and '\n' not in msg, msg
    assert changed(before, tree_state(tmp_path, skip=[tmp_path / 'out'])) \
        == {}
    demo = WebDemo(device='cpu', out_root=str(tmp_path / 'web'))
    overlay, files, status = demo.run(tiff, None, ['seg'], {})
    assert overlay is None and 'twice.tif is not an image' in status
    # peak memory: the TIFF after a 64 x 64 PNG, in a fresh process (a
    # decode at the first size would add 2.5 GiB; 64 MiB is the margin for
    # allocator noise of a small decode)
    small = _png(tmp_path / 'small.png', 64, 64)
    code = ('import resource, sys\n'
            'from sapiens_mm.utils.image_io import read_image\n'
            'for path in sys.argv[1:]:\n'
            '    try:\n'
            '        read_image(path, backend="cv2")\n'
            '    except OSError as e:\n'
            '        print("refused:", e)\n'
            '    print("peak", resource.getrusage(\n'
            '        resource.RUSAGE_SELF).ru_maxrss / 1024)\n')
    rc, out, err, _ = run_measured(['-c', code, small, tiff], tmp_path,
                                   env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert rc == 0 and 'refused: cannot decode' in out, out + err[-2000:]
    png_peak, tiff_peak = [float(line.split()[1]) for line in
                           out.splitlines() if line.startswith('peak')]
    assert tiff_peak < png_peak + 64, (png_peak, tiff_peak)
