"""Sharded inference on CPU (gloo): 2 processes write what 1 process
writes; a rank killed mid-run and a SIGTERM both resume to the same outputs
(also with another number of processes); --coco-results evaluates with
pycocotools.

One reference run (in-process, 1 process) is shared by the tests; each
multi-process run is one launcher call, checked by several assertions."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from cluster_helpers import ROOT, free_port, run_env, tail
from inference_helpers import image, small_cfg
from mmengine.registry import DefaultScope

from sapiens_mm.cli.infer import main
from sapiens_mm.engine.sharded import REQUEUE_EXIT_CODE

#: Files of a run that are not per-input outputs.
RUN_FILES = ('manifests', 'manifest.jsonl', 'summary.json')


@pytest.fixture(scope='module')
def setup(tmp_path_factory):
    """Data (nested folders, same-stem files, a corrupt image, a video,
    a COCO-numbered image, a missing entry) listed in ``inputs.txt``; pose
    + seg models saved to files (every process loads the same weights);
    and the reference: one plain process over the list."""
    tmp = tmp_path_factory.mktemp('sharded')
    data = tmp / 'data'
    files = ['x.jpg', 'x.png', 'a/x.jpg', 'b/x.jpg', 'a/c/deep.png',
             '000000000139.jpg'] + [f'more/p{i}.png' for i in range(8)]
    for i, f in enumerate(files):
        (data / f).parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(data / f), image(40 + 2 * i, 30 + i, i))
    (data / 'bad.jpg').write_bytes(b'\xff\xd8\xff not a jpeg')
    video = cv2.VideoWriter(str(data / 'clip.mp4'),
                            cv2.VideoWriter_fourcc(*'mp4v'), 10, (48, 36))
    for i in range(4):
        video.write(image(36, 48, 100 + i))
    video.release()
    entries = files + ['bad.jpg', 'clip.mp4', 'missing.jpg']
    (data / 'inputs.txt').write_text('# test inputs\n' + '\n'.join(entries))
    args = ['--detector', 'none', '--device', 'cpu', '--no-progress']
    pose_args = []
    for task, scope in (('pose', 'mmpose'), ('seg', 'mmseg')):
        cfg = small_cfg(task)
        cfg.dump(str(tmp / f'{task}.py'))
        registry = __import__(f'{scope}.registry', fromlist=['MODELS'])
        torch.manual_seed(0)
        with DefaultScope.overwrite_default_scope(scope):
            model = registry.MODELS.build(cfg.model)
        torch.save({'state_dict': model.state_dict()}, tmp / f'{task}.pth')
        args += [f'--{task}', str(tmp / f'{task}.pth'),
                 f'--{task}-config', str(tmp / f'{task}.py')]
        if task == 'pose':
            pose_args = list(args)
    ref = tmp / 'ref'
    summary = main([str(data / 'inputs.txt'), '--out-dir', str(ref)] + args)
    return dict(tmp=tmp, data=data, entries=entries, args=args,
                pose_args=pose_args, ref=ref, summary=summary)


def _outputs(out: Path) -> dict:
    """``{relative path: content}`` of a run's per-input files (JSON
    parsed, the rest as bytes), hidden temporary files excluded."""
    found = {}
    for path in sorted(out.rglob('*')):
        rel = path.relative_to(out)
        if (path.is_dir() or rel.parts[0] in RUN_FILES
                or path.name.startswith('.')):
            continue
        found[str(rel)] = (json.loads(path.read_text())
                           if path.suffix == '.json' else path.read_bytes())
    return found


def _manifest(out: Path) -> dict:
    """``{name: (status, outputs)}`` of the merged manifest; fails on an
    input recorded twice."""
    records = [json.loads(line) for line in
               (out / 'manifest.jsonl').read_text().splitlines()]
    names = [r['name'] for r in records]
    assert len(names) == len(set(names)), 'an input recorded twice'
    return {r['name']: (r['status'], sorted(r['outputs'])) for r in records}


def _launch(setup, out, nprocs, *extra, log):
    env = dict(run_env(setup['tmp']), PYTHON=sys.executable,
               PORT=str(free_port()))
    args = setup['args']
    if '--progress-interval' in extra:
        args = [a for a in args if a != '--no-progress']
    cmd = ['bash', str(ROOT / 'tools' / 'dist_infer.sh'), str(nprocs),
           str(setup['data'] / 'inputs.txt'), '--out-dir', str(out),
           *args, *extra]
    return subprocess.Popen(cmd, env=env, stdout=open(log, 'w'),
                            stderr=subprocess.STDOUT, cwd=str(ROOT),
                            start_new_session=True)


def _wait(proc, log, timeout=240):
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f'timed out; log:\n{tail(log)}')


def _wait_for_record(out: Path, rank: int, proc, log, timeout=180):
    """Wait until ``rank`` recorded a processed input; its progress."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, f'ended early:\n{tail(log)}'
        for m in (out / 'manifests').glob(f'*.rank{rank:05d}.jsonl'):
            lines = m.read_text().splitlines()
            if any('"ok"' in line for line in lines):
                return json.loads((out / 'manifests' /
                                   f'progress.rank{rank:05d}.json'
                                   ).read_text())
        time.sleep(0.02)
    raise AssertionError(f'no record from rank {rank}:\n{tail(log)}')


def test_reference_run(setup):
    """The single process's names and records: nested same-stem files keep
    their folders, same-stem files of one folder get x / x_1, the video
    gets per-frame files and an .mp4, bad inputs are recorded failed."""
    ref, summary = setup['ref'], setup['summary']
    out = _outputs(ref)
    for name in ('x', 'x_1', 'a/x', 'b/x', 'a/c/deep', '000000000139'):
        assert f'pose/{name}.json' in out and f'seg/{name}.npy' in out
        assert f'seg/{name}.png' in out
    # x.jpg keeps "x", x.png (same folder, same stem) becomes "x_1"
    assert out['pose/x.json']['input'].endswith('x.jpg')
    assert out['pose/x_1.json']['input'].endswith('x.png')
    assert [k for k in out if k.startswith('seg/clip/')] == [
        f'seg/clip/{i:06d}.npy' for i in range(4)]
    assert 'seg/clip.mp4' in out and 'pose/clip.mp4' in out
    manifest = _manifest(ref)
    assert len(manifest) == len(setup['entries'])
    assert manifest['bad'][0] == manifest['missing'][0] == 'failed'
    assert {s for n, (s, _) in manifest.items()
            if n not in ('bad', 'missing')} == {'ok'}
    assert sorted(manifest['x'][1]) == ['pose/x.json', 'pose/x.png',
                                        'seg/x.npy', 'seg/x.png']
    assert summary['processed'] == len(setup['entries']) - 2
    assert summary['failed'] == 2 and summary['frames'] == 14 + 4
    # a second plain run over the same folder redoes nothing
    again = main([str(setup['data'] / 'inputs.txt'), '--out-dir', str(ref)] +
                 setup['args'])
    assert again['processed'] == 0 and again['skipped'] == 15
    assert again['failed'] == 2  # bad inputs are retried


@pytest.mark.slow
def test_two_processes_write_what_one_writes(setup, tmp_path):
    out, log = tmp_path / 'two', tmp_path / 'two.log'
    proc = _launch(setup, out, 2, '--progress-interval', '0.3', log=log)
    assert _wait(proc, log) == 0, tail(log)
    ref = _outputs(setup['ref'])
    two = _outputs(out)
    assert sorted(two) == sorted(ref)
    for k in ref:  # bytes for PNG / NPY / MP4, values for JSON
        assert two[k] == ref[k], k
    assert _manifest(out) == _manifest(setup['ref'])
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['world_size'] == 2 and len(summary['ranks']) == 2
    assert sum(r['processed'] for r in summary['ranks']) == 15
    text = log.read_text()
    assert 'progress: ' in text  # rank 0's periodic lines, no bars
    assert 'Sapiens inference' not in text


@pytest.mark.slow
def test_killed_rank_then_resume_with_one_process(setup, tmp_path):
    out, log = tmp_path / 'kill', tmp_path / 'kill.log'
    proc = _launch(setup, out, 2, log=log)
    progress = _wait_for_record(out, 1, proc, log)
    os.kill(progress['pid'], signal.SIGKILL)
    rc = _wait(proc, log)
    text = log.read_text()
    assert rc not in (0, REQUEUE_EXIT_CODE), text
    # the launcher names the rank and where it was
    line = next(ln for ln in text.splitlines()
                if ln.startswith('rank 1 (pid'))
    assert 'did not finish' in line
    assert str(setup['data']) in line
    assert not (out / 'summary.json').exists()
    # resume with one plain process: the same files, each input once
    summary = main([str(setup['data'] / 'inputs.txt'), '--out-dir',
                    str(out)] + setup['args'])
    assert summary['skipped'] >= 1  # rank 1's recorded work was kept
    assert summary['skipped'] + summary['processed'] == 15
    ref = _outputs(setup['ref'])
    resumed = _outputs(out)
    assert sorted(resumed) == sorted(ref)
    for k in ref:
        assert resumed[k] == ref[k], k
    assert _manifest(out) == _manifest(setup['ref'])
    assert [p.name for p in (out / 'manifests').glob('*.jsonl')] == []


@pytest.mark.slow
def test_sigterm_flushes_and_asks_for_a_requeue(setup, tmp_path):
    """SIGTERM to the launcher (as SLURM sends it): every rank stops after
    its batch with complete manifests and the launcher exits with the
    requeue code; the resumed run completes."""
    out, log = tmp_path / 'term', tmp_path / 'term.log'
    proc = _launch(setup, out, 2, log=log)
    _wait_for_record(out, 0, proc, log)
    proc.send_signal(signal.SIGTERM)  # the launcher script
    assert _wait(proc, log) == REQUEUE_EXIT_CODE, tail(log)
    ok = 0
    for manifest in (out / 'manifests').glob('*.rank*.jsonl'):
        for line in manifest.read_text().splitlines():  # complete lines
            record = json.loads(line)
            if set(record) == {'synced'}:  # a commit line
                continue
            ok += record['status'] == 'ok'
            for o in record['outputs']:
                assert (out / o).is_file()
    assert 1 <= ok < 15
    assert not (out / 'summary.json').exists()
    for rank in (0, 1):
        progress = json.loads((out / 'manifests' /
                               f'progress.rank{rank:05d}.json').read_text())
        assert progress['stopped'] and not progress['finished']
    summary = main([str(setup['data'] / 'inputs.txt'), '--out-dir',
                    str(out)] + setup['args'])
    assert summary['skipped'] == ok
    ref = _outputs(setup['ref'])
    resumed = _outputs(out)
    assert sorted(resumed) == sorted(ref)
    for k in ref:
        assert resumed[k] == ref[k], k


def test_other_options_are_refused(setup, tmp_path):
    """Resuming with other output options would mix two kinds of
    outputs."""
    with pytest.raises(ValueError, match='differ in: no_save_vis'):
        main([str(setup['data'] / 'inputs.txt'), '--out-dir',
              str(setup['ref']), '--no-save-vis'] + setup['args'])


def test_coco_results_evaluate_with_pycocotools(setup, tmp_path):
    """COCO-numbered images (the benchmark's names): the results file loads
    with loadRes and scores AP 1 against ground truth made from the
    per-image pose files (the COCO-17 keypoints picked by name from the
    model's 308, independently of the converter)."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    from sapiens_mm.datasets.keypoint_formats import layout_names
    data = tmp_path / 'coco'
    ids = {'000000000139.jpg': 139, '000000000285.jpg': 285,
           'sub/000000000632.jpg': 632}
    for i, f in enumerate(ids):
        (data / f).parent.mkdir(parents=True, exist_ok=True)
        cv2.imwrite(str(data / f), image(48, 40, 200 + i))
    (data / 'val.txt').write_text('\n'.join(ids))
    out, results = tmp_path / 'out', tmp_path / 'results.json'
    main([str(data / 'val.txt'), '--out-dir', str(out), '--coco-results',
          str(results), '--no-save-vis'] + setup['pose_args'])
    coco_names = list(layout_names('coco17'))
    images, anns = [], []
    for f, image_id in ids.items():
        doc = json.loads((out / 'pose' / f.replace('.jpg', '.json')
                          ).read_text())
        images.append(dict(id=image_id, width=doc['width'],
                           height=doc['height'], file_name=f))
        idx = [doc['keypoint_names'].index(n) for n in coco_names]
        for inst in doc['instances']:
            k = np.asarray(inst['keypoints']).reshape(-1, 3)[idx]
            x, y, w, h = inst['bbox']
            anns.append(dict(
                id=len(anns) + 1, image_id=image_id, category_id=1,
                keypoints=np.c_[k[:, :2], np.full(17, 2)].ravel().tolist(),
                num_keypoints=17, bbox=[x, y, w, h], area=w * h, iscrowd=0))
    gt = COCO()
    gt.dataset = dict(images=images, annotations=anns, categories=[
        dict(id=1, name='person', keypoints=coco_names, skeleton=[])])
    gt.createIndex()
    dt = gt.loadRes(str(results))
    assert len(dt.getAnnIds()) == len(anns) == 3  # one per person
    ev = COCOeval(gt, dt, 'keypoints')
    ev.evaluate()
    ev.accumulate()
    ev.summarize()
    assert ev.stats[0] == pytest.approx(1.0)  # AP: right images, keypoints


def test_streamed_names_are_the_single_run_names(tmp_path):
    """iter_sources names a folder's images as collect_sources (the
    single-process run) does, without listing them all; a glob and a list
    file over the same tree give the same names (plus the videos); a list
    entry outside the list's folder is named by its absolute path, never
    with '..'."""
    from sapiens_mm.apis.inferencers.utils import (collect_sources,
                                                   count_sources,
                                                   iter_sources)
    root = tmp_path / 'tree'
    files = ['x.jpg', 'x.png', 'x_1.png', 'a/x.jpg', 'a/x.PNG', 'a.b/y.jpg',
             'a/c/z.webp', 'b/x.jpg']
    for f in files:
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_bytes(b'not decoded here')
    (root / 'a' / 'clip.mp4').write_bytes(b'video')
    single = {s.path: s.name for s in collect_sources(str(root))}
    streamed = {s.path: s.name for s in iter_sources([str(root)])}
    assert streamed == single
    assert single[str(root / 'x.png')] == 'x_2'  # x_1.png keeps x_1
    # sorted by file name: x.PNG (upper case first) keeps a/x
    assert single[str(root / 'a' / 'x.jpg')] == 'a/x_1'
    assert count_sources([str(root)]) == len(files)
    by_glob = {os.path.normpath(s.path): s.name
               for s in iter_sources([str(root / '**' / '*')])}
    assert by_glob == dict(single, **{str(root / 'a' / 'clip.mp4'): 'a/clip'})
    outside = tmp_path / 'elsewhere' / 'w.jpg'
    outside.parent.mkdir()
    outside.write_bytes(b'w')
    listing = root / 'list.txt'
    listing.write_text('\n'.join(files[::-1] + ['../elsewhere/w.jpg']))
    by_list = {os.path.normpath(s.path): s.name
               for s in iter_sources([str(listing)])}
    assert by_list == dict(
        single, **{str(outside): str(outside.with_suffix(''))[1:]})
    with pytest.raises(ValueError, match='one folder, list file or glob'):
        list(iter_sources([str(root), str(outside)]))
