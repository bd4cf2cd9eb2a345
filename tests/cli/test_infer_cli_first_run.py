"""The inference CLI on a new user's first runs: --show on a machine
without a display, errors in CLI words, quiet by default (--verbose shows
the other packages' warnings)."""
import warnings
from pathlib import Path

import cv2
import numpy as np
import pytest

from sapiens_mm.cli.infer import cli, main

ROOT = Path(__file__).resolve().parents[2]
SEG_TINY = ROOT / 'configs/seg/goliath/sapiens_tiny-200e_goliath-256x192.py'


def _error(argv):
    with pytest.raises(SystemExit) as exc:
        cli(argv, prog='infer')
    msg = str(exc.value.code)  # SystemExit(message): exit status 1
    assert '\n' not in msg
    return msg


def test_show_without_display_is_one_line_before_any_model(monkeypatch,
                                                           tmp_path):
    monkeypatch.delenv('DISPLAY', raising=False)
    monkeypatch.delenv('WAYLAND_DISPLAY', raising=False)
    # a released model that is not in the (empty) cache: had a model been
    # loaded first, the missing download would be the error
    img = tmp_path / 'photo.png'
    cv2.imwrite(str(img), np.full((16, 12, 3), 128, np.uint8))
    msg = _error([str(img), '--pose', 'sapiens2-pose-0.4b', '--show'])
    assert msg.startswith('infer: error: --show needs a window, but no '
                          'display (DISPLAY and WAYLAND_DISPLAY are not set)')
    assert 'Run without --show' in msg
    assert not (tmp_path / 'outputs').exists()


def test_tasks_without_a_model_speak_cli_options(tmp_path):
    img = tmp_path / 'photo.png'
    cv2.imwrite(str(img), np.full((16, 12, 3), 128, np.uint8))
    msg = _error([str(img), '--seg-config', str(SEG_TINY),
                  '--tasks', 'seg', 'depth'])
    assert '--tasks seg depth asks for depth but no depth model was given: ' \
        'add --depth CKPT' in msg
    assert 'models=' not in msg


def _warnings_of(argv):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        main(argv)
    return [str(w.message) for w in caught]


def test_quiet_by_default_verbose_shows_third_party_warnings(tmp_path):
    img = tmp_path / 'photo.png'
    cv2.imwrite(str(img), np.full((64, 48, 3), 128, np.uint8))
    argv = [str(img), '--seg-config', str(SEG_TINY), '--device', 'cpu',
            '--no-progress', '--out-dir', str(tmp_path / 'out')]
    quiet = _warnings_of(argv)
    assert not [m for m in quiet if 'build_loss' in m], quiet
    # building the seg model warns in mmseg: shown with --verbose
    loud = _warnings_of(argv + ['--verbose'])
    assert [m for m in loud if 'build_loss' in m], loud
    # and the filters do not outlive the run
    assert not [f for f in warnings.filters
                if f[2] is not None and 'mmseg' in str(f[3])]


@pytest.mark.parametrize('entry', [['-m', 'sapiens_mm'], ['tools/infer.py']])
def test_help_imports_neither_torch_nor_openmmlab(entry):
    """--help prints the options without importing the model stack (its
    start-up is measured in the notes: ~0.2 s against 8-30 s with it)."""
    import os
    import subprocess
    import sys
    proc = subprocess.run(
        [sys.executable, '-X', 'importtime', *entry, '--help'], cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True,
        text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert '--kpt-thr' in proc.stdout and 'bbox_format' in proc.stdout
    imported = {line.split('|')[-1].strip()
                for line in proc.stderr.splitlines()
                if line.startswith('import time:')}
    assert 'sapiens_mm.cli.infer' in imported
    assert not {'torch', 'mmengine', 'mmpose', 'mmseg', 'cv2'} & imported
