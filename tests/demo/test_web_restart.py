"""The web demo restarted with the same output folder keeps working: each
request gets a new run folder after those already there."""
from pathlib import Path

import numpy as np

from sapiens_mm.demo.web import WebDemo


def test_restart_with_the_same_out_dir(tmp_path):
    rgb = np.zeros((60, 40, 3), np.uint8)
    rgb[10:50, 10:30] = (200, 120, 40)
    root = tmp_path / 'runs'
    first = WebDemo(device='cpu', out_root=str(root))
    _, files, status = first.run(None, rgb, ['depth'], {})
    assert status.startswith('Ran depth'), status
    before = {f: Path(f).read_bytes() for f in files}
    # a new demo process (the run counter starts again) on the same folder
    second = WebDemo(device='cpu', out_root=str(root))
    overlays, files2, status = second.run(None, rgb, ['depth'], {})
    assert status.startswith('Ran depth'), status
    assert overlays is not None and len(files2) == 3
    assert {Path(f).parent.parent.name for f in files} == {'run_0001'}
    assert {Path(f).parent.parent.name for f in files2} == {'run_0002'}
    # the first run's downloads are untouched
    assert {f: Path(f).read_bytes() for f in files} == before
