"""The quick start of docs/get_started.md runs as written on the tiny model:
data generation, one epoch of training, evaluation and inference, each
command read from the page and run in-process in a fresh folder."""
import gc
import json
import multiprocessing

import cv2
import numpy as np
import pytest

from doc_commands import ROOT, entry_point, run_entry, section_commands

QUICK_START = ('docs/get_started.md', 'Quick start on a tiny model')


def _end_leftover_workers(before):
    """End the data-loader worker processes a command left (the persistent
    workers of its Runner), as the exit of its own process would; left to
    the garbage collector, each takes torch's 5 s join timeout."""
    for child in set(multiprocessing.active_children()) - before:
        child.terminate()
        child.join()
    gc.collect()


@pytest.mark.slow
def test_quick_start_commands_run(tmp_path, monkeypatch, capsys):
    commands = section_commands(ROOT / QUICK_START[0], QUICK_START[1])
    assert [c.argv[1] for c in commands] == [
        'tools/generate_synthetic.py', 'tools/train.py', 'tools/test.py',
        '-m'
    ]
    # the page's relative paths: configs/ of the checkout, the rest new
    (tmp_path / 'configs').symlink_to(ROOT / 'configs')
    monkeypatch.chdir(tmp_path)
    for command in commands:
        kind, name, args = entry_point(command.argv)
        before = set(multiprocessing.active_children())
        try:
            run_entry(kind, name, args)
        except SystemExit as e:
            if e.code not in (None, 0):
                pytest.fail(f'{command}\n  exited with {e.code}: '
                            f'{capsys.readouterr().err[-2000:]}')
        finally:
            _end_leftover_workers(before)

    images = sorted((tmp_path / 'data/synthetic/val/images').glob('*.png'))
    assert len(images) == 4
    assert (tmp_path / 'work_dirs/quick_seg/epoch_1.pth').is_file()
    metrics = json.loads(
        (tmp_path / 'work_dirs/quick_seg/metrics.json').read_text())
    assert 0 <= metrics['metrics']['mIoU'] <= 100
    assert 0 <= metrics['metrics']['aAcc'] <= 100
    # what step 4 says it writes: labels and part colours per image
    for image in images:
        labels = np.load(tmp_path / 'outputs/quick/seg' / f'{image.stem}.npy')
        height, width = cv2.imread(str(image)).shape[:2]
        assert labels.shape == (height, width)
        assert labels.dtype == np.uint8 and labels.max() < 28
        assert (tmp_path / 'outputs/quick/seg' / f'{image.stem}.png').is_file()
