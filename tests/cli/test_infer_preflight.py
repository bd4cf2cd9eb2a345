"""The inference CLI refuses bad arguments before torch and the OpenMMLab
packages load: a mistyped model name, a missing file, a folder without
images and ``--show`` without a display each end in one line, about as fast
as ``--help`` (timed as a ratio to it, in one run); the package's import
reads no command line and changes no warning filter; Ctrl-C keeps what was
written (a playable partial video, outputs.json) and exits 130."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import cv2
import numpy as np
import pytest

from sapiens_mm.cli.preflight import check_input, check_model
from sapiens_mm.zoo import UnknownModelError

ROOT = Path(__file__).resolve().parents[2]
SEG_TINY = ROOT / 'configs/seg/goliath/sapiens_tiny-200e_goliath-256x192.py'
#: Modules whose import means the model stack loaded.
HEAVY = {'torch', 'mmengine', 'mmpose', 'mmseg', 'mmpretrain', 'mmcv'}


def _env(**extra):
    env = dict(os.environ, PYTHONPATH=str(ROOT), **extra)
    for var in ('DISPLAY', 'WAYLAND_DISPLAY'):
        env.pop(var, None)
    return env


def _run(entry, args, cwd, importtime=False):
    """Run the CLI in a fresh interpreter; (process, seconds, imports)."""
    cmd = [sys.executable] + (['-X', 'importtime'] if importtime else []) \
        + entry + args
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=_env(), capture_output=True,
                          text=True, timeout=300)
    seconds = time.perf_counter() - start
    imported = {line.split('|')[-1].strip()
                for line in proc.stderr.splitlines()
                if line.startswith('import time:')}
    return proc, seconds, imported


def _error_cases(tmp_path):
    """(arguments, start of the one-line error) of each refused command."""
    image = tmp_path / 'photo.png'
    cv2.imwrite(str(image), np.full((32, 24, 3), 128, np.uint8))
    empty = tmp_path / 'empty'
    empty.mkdir(exist_ok=True)
    return {
        'model name typo': (
            [str(image), '--pose', 'sapiens2-pose-0.4bb'],
            '--pose sapiens2-pose-0.4bb: neither a file nor a released '
            'model; did you mean sapiens2-pose-0.4b'),
        'missing checkpoint': (
            [str(image), '--seg', str(tmp_path / 'missing.pth')],
            f'--seg {tmp_path / "missing.pth"}: no such file.'),
        'missing input': (
            [str(tmp_path / 'nope.jpg'), '--seg-config', str(SEG_TINY)],
            f'Input not found: {tmp_path / "nope.jpg"}'),
        'empty folder': (
            [str(empty), '--seg-config', str(SEG_TINY)],
            f'Input folder {empty} holds no image'),
        'show without a display': (
            [str(image), '--seg-config', str(SEG_TINY), '--show'],
            '--show needs a window, but no display'),
    }


@pytest.mark.slow
@pytest.mark.parametrize('entry', [['-m', 'sapiens_mm'], ['tools/infer.py']])
def test_errors_come_before_the_model_stack_loads(entry, tmp_path):
    """Each error: exit code 1, one line naming the problem, and neither
    torch nor an OpenMMLab package imported (``-X importtime``)."""
    prog = 'python -m sapiens_mm' if entry[0] == '-m' else 'tools/infer.py'
    for what, (args, message) in _error_cases(tmp_path).items():
        proc, _, imported = _run(entry, args, ROOT, importtime=True)
        assert proc.returncode == 1, (what, proc.stderr[-2000:])
        lines = [ln for ln in proc.stderr.splitlines()
                 if not ln.startswith('import time:')]
        assert len(lines) == 1, (what, lines)
        assert lines[0].startswith(f'{prog}: error: {message}'), (what,
                                                                   lines[0])
        assert not HEAVY & imported, (what, sorted(HEAVY & imported))
        assert 'sapiens_mm.cli.preflight' in imported


@pytest.mark.slow
def test_errors_take_about_as_long_as_help(tmp_path):
    """Printed for the record: each error's time as a ratio to ``--help``
    (best of three runs each, interleaved). Loading torch alone takes ten
    times ``--help`` (about 0.2 s against 2 s here), so a ratio under 3
    means the error came before the model stack."""
    cases = _error_cases(tmp_path)
    best = {name: float('inf') for name in ['--help', *cases]}
    for _ in range(3):
        for name in best:
            args = ['--help'] if name == '--help' else cases[name][0]
            _, seconds, _ = _run(['-m', 'sapiens_mm'], args, ROOT)
            best[name] = min(best[name], seconds)
    ratios = {name: best[name] / best['--help'] for name in cases}
    print(f'--help {best["--help"]:.2f} s; errors / --help: '
          + ', '.join(f'{k} {v:.2f}' for k, v in ratios.items()))
    assert max(ratios.values()) < 3, ratios


def test_model_names_and_paths_are_checked_by_the_registry(tmp_path):
    """A registry name, alias, repository id (with a revision) and an
    existing file pass; a near miss gets the closest names, a missing file
    says so."""
    for ok in ('sapiens2-pose-0.4b', 'facebook/sapiens2-pose-0.4b',
               'sapiens2-pose-0.4b@main', str(SEG_TINY)):
        check_model(ok, '--pose')
    with pytest.raises(UnknownModelError,
                       match='did you mean sapiens2-seg-0.4b'):
        check_model('sapiens2-seg-04b', '--seg')
    with pytest.raises(FileNotFoundError, match='x.safetensors: no such'):
        check_model(str(tmp_path / 'x.safetensors'), '--seg')
    # inputs: a webcam name passes, a folder of videos is told why
    check_input('webcam:1')
    videos = tmp_path / 'clips'
    videos.mkdir()
    (videos / 'walk.mp4').write_bytes(b'')
    with pytest.raises(ValueError, match='videos in it are not read'):
        check_input(str(videos))


def test_the_package_import_reads_no_command_line(tmp_path):
    """A program of the user's named tools/infer.py, run with --help (and
    without --verbose), imports sapiens_mm: everything is registered, and
    none of the filters that hide other packages' warnings in the CLI is
    added (the import once decided both from the command line)."""
    script = tmp_path / 'tools' / 'infer.py'
    script.parent.mkdir()
    script.write_text(textwrap.dedent("""
        import sys, warnings
        import sapiens_mm
        from sapiens_mm.cli.common import THIRD_PARTY_WARNINGS
        from mmpretrain.registry import MODELS
        assert MODELS.get('SapiensVisionTransformer') is not None
        hidden = {module for _, module in THIRD_PARTY_WARNINGS}
        added = [f for f in warnings.filters
                 if getattr(f[3], 'pattern', f[3]) in hidden]
        assert not added, added
        print('registered', sys.argv[1:])
        """))
    proc = subprocess.run([sys.executable, 'tools/infer.py', '--help'],
                          cwd=tmp_path, env=_env(), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "registered ['--help']" in proc.stdout


def _video(path, frames, size=(48, 64)):
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*'mp4v'), 10,
                             size)
    for i in range(frames):
        img = np.full((size[1], size[0], 3), (i * 7) % 255, np.uint8)
        cv2.circle(img, (size[0] // 2, 10 + i % 40), 6, (0, 0, 255), -1)
        writer.write(img)
    writer.release()


def _frames(path):
    cap = cv2.VideoCapture(str(path))
    n = 0
    while cap.read()[0]:
        n += 1
    return n


@pytest.mark.slow
def test_ctrl_c_keeps_a_playable_partial_video(tmp_path):
    """SIGINT to a run on a video: exit code 130, the mp4 plays with the
    frames written so far, outputs.json lists exactly those, and one line
    says how many of how many were kept."""
    video = tmp_path / 'walk.mp4'
    _video(video, 400)
    out = tmp_path / 'out'
    proc = subprocess.Popen(
        [sys.executable, '-m', 'sapiens_mm', str(video), '--seg-config',
         str(SEG_TINY), '--device', 'cpu', '--dtype', 'fp32',
         '--no-progress', '--out-dir', str(out)],
        cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    frames_dir = out / 'seg' / 'walk'
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None and not (
            frames_dir.is_dir() and len(list(frames_dir.iterdir())) >= 5):
        time.sleep(0.2)
    assert proc.poll() is None, 'the run ended before it was interrupted'
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, output[-3000:]
    summary = json.loads((out / 'outputs.json').read_text())
    kept = len(summary)
    assert 5 <= kept < 400
    assert [r['frame_index'] for r in summary] == list(range(kept))
    assert _frames(out / 'seg' / 'walk.mp4') == kept
    assert len(list(frames_dir.glob('*.npy'))) == kept
    assert f'kept {kept} of 400 frames' in output
    assert output.rstrip().endswith('python -m sapiens_mm: interrupted')
    # no temporary video folder is left beside it
    assert sorted(p.name for p in (out / 'seg').iterdir()) == [
        'walk', 'walk.mp4']
