"""Sharded inference on CPU (gloo): 2 processes write what 1 process
writes; a rank killed mid-run and a SIGTERM both resume to the same outputs
(also with another number of processes); two simulated nodes, one of whose
worker is killed: the other stops within --rank-timeout naming it, and the
re-run completes; two list entries with one output name get two outputs;
tampered manifest records are redone; --coco-results evaluates with
pycocotools and a bad path fails before any work.

One reference run (in-process, 1 process) is shared by the tests; each
multi-process run is one launcher call, checked by several assertions."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from attack_helpers import tree_state
from cluster_helpers import ROOT, free_port, run_env, tail
from inference_helpers import image, small_cfg
from log_helpers import logged_warnings
from mmengine.registry import DefaultScope

from sapiens_mm.cli.infer import cli, main
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


def _same_as_reference(out: Path, setup) -> None:
    """``out`` holds the reference run's files (bytes for PNG / NPY / MP4,
    values for JSON) and its manifest, each input once."""
    ref = _outputs(setup['ref'])
    got = _outputs(out)
    assert sorted(got) == sorted(ref)
    for k in ref:
        assert got[k] == ref[k], k
    assert _manifest(out) == _manifest(setup['ref'])


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
    _same_as_reference(out, setup)
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
    _same_as_reference(out, setup)
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
    _same_as_reference(out, setup)


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


def _hidden_files(out: Path) -> list:
    """Files a run leaves under hidden names (temporary files)."""
    return [str(p.relative_to(out)) for p in out.rglob('.*')]


def _launch_node(setup, out, node_rank, port, log):
    """One node of a two-node job on this machine: tools/dist_infer.sh with
    one process, NNODES=2 and a static rendezvous on 127.0.0.1."""
    env = dict(run_env(setup['tmp']), PYTHON=sys.executable, NNODES='2',
               NODE_RANK=str(node_rank), MASTER_ADDR='127.0.0.1',
               PORT=str(port), SAPIENS_MM_RANK_TIMEOUT=str(RANK_TIMEOUT))
    cmd = ['bash', str(ROOT / 'tools' / 'dist_infer.sh'), '1',
           str(setup['data'] / 'inputs.txt'), '--out-dir', str(out),
           *setup['args']]
    return subprocess.Popen(cmd, env=env, stdout=open(log, 'w'),
                            stderr=subprocess.STDOUT, cwd=str(ROOT),
                            start_new_session=True)


#: --rank-timeout of the two-node test (SAPIENS_MM_RANK_TIMEOUT): long
#: enough for a heartbeat every 1.6 s to get through on 2 busy cores.
RANK_TIMEOUT = 8


@pytest.mark.slow
def test_two_nodes_one_killed_then_resumed(setup, tmp_path):
    """Node 1's worker is SIGKILLed mid-batch: node 0 finishes its share,
    waits RANK_TIMEOUT seconds of silence and exits non-zero with one
    message naming rank 1, its process and its in-flight inputs; the same
    two commands then complete the run, with the outputs and manifest of
    one process."""
    out = tmp_path / 'nodes'
    logs = [tmp_path / 'node0.log', tmp_path / 'node1.log']
    port = free_port()
    nodes = [_launch_node(setup, out, r, port, logs[r]) for r in (0, 1)]
    try:
        deadline = time.time() + 240
        progress = out / 'manifests' / 'progress.rank00001.json'
        while True:  # rank 1 recorded an input and works on the next
            assert time.time() < deadline, tail(logs[1])
            assert nodes[1].poll() is None, tail(logs[1])
            try:
                p = json.loads(progress.read_text())
            except (OSError, ValueError):
                p = {}
            if p.get('ok', 0) >= 1 and p.get('in_flight'):
                break
            time.sleep(0.01)
        os.kill(p['pid'], signal.SIGKILL)
        killed = time.time()
        assert _wait(nodes[1], logs[1]) != 0
        rc = _wait(nodes[0], logs[0])
        # its own share, then the silence: not the 600 s default
        assert time.time() - killed < RANK_TIMEOUT + 120
    finally:
        for node in nodes:
            if node.poll() is None:
                os.killpg(node.pid, signal.SIGKILL)
    text = logs[0].read_text()
    assert rc not in (0, REQUEUE_EXIT_CODE), text
    final = json.loads(progress.read_text())  # what rank 1 last said
    assert final['in_flight'] and not final['finished']
    lost = [ln for ln in text.splitlines()
            if 'Rank(s) 1 stopped before finishing' in ln]
    assert len(lost) == 1, text
    assert f'rank 1 (pid {final["pid"]} on ' in lost[0]
    assert re.search(r'no heartbeat for \d+ s \(--rank-timeout 8\)',
                     lost[0])
    assert 'while processing ' + ', '.join(final['in_flight']) in lost[0]
    assert 'run the same command again to resume' in lost[0]
    assert not (out / 'summary.json').exists()
    # the same two commands resume
    port = free_port()
    logs = [tmp_path / 'node0_resumed.log', tmp_path / 'node1_resumed.log']
    nodes = [_launch_node(setup, out, r, port, logs[r]) for r in (0, 1)]
    for r in (0, 1):
        assert _wait(nodes[r], logs[r]) == 0, tail(logs[r])
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['world_size'] == 2 and summary['skipped'] >= 1
    assert summary['skipped'] + summary['processed'] == 15
    _same_as_reference(out, setup)
    assert _hidden_files(out) == []


def _colliding_list(tmp_path: Path):
    """A list file holding ``<abs>/x.png`` relative to its folder and the
    absolute ``/<abs>/x.png`` (two different images): both are named
    ``<abs>/x`` by their paths. Returns (list, {path: expected name})."""
    base, elsewhere = tmp_path / 'L', tmp_path / 'abs' / 'a'
    rel = str(elsewhere / 'x.png').lstrip('/')
    (base / rel).parent.mkdir(parents=True)
    elsewhere.mkdir(parents=True)
    cv2.imwrite(str(base / rel), image(44, 36, 1))
    cv2.imwrite(str(elsewhere / 'x.png'), image(40, 32, 2))
    listing = base / 'list.txt'
    listing.write_text(f'{rel}\n{elsewhere / "x.png"}\n')
    name = str(elsewhere / 'x').lstrip('/')
    return listing, {str(base / rel): name,
                     str(elsewhere / 'x.png'): name + '_1'}


def _check_collision_outputs(out: Path, expected: dict) -> None:
    manifest = _manifest(out)
    assert manifest == {n: ('ok', [f'pose/{n}.json', f'pose/{n}.png'])
                        for n in expected.values()}
    for path, name in expected.items():  # each output from its own input
        doc = json.loads((out / 'pose' / f'{name}.json').read_text())
        assert doc['input'] == path
        assert (doc['height'], doc['width']) == cv2.imread(path).shape[:2]


def test_two_entries_one_name_get_two_outputs(setup, tmp_path):
    listing, expected = _colliding_list(tmp_path)
    out = tmp_path / 'out'
    before = tree_state(tmp_path, [out])
    with logged_warnings() as messages:
        summary = main([str(listing), '--out-dir', str(out)] +
                       setup['pose_args'])
    assert summary['processed'] == 2 and summary['failed'] == 0
    _check_collision_outputs(out, expected)
    said = [m for m in messages if 'has the output name' in m]
    path, name = list(expected.items())[1]
    assert said == [f'{listing}: {path} has the output name '
                    f'{name[:-2]!r} of an earlier entry; its outputs are '
                    f'named {name!r}.']
    assert tree_state(tmp_path, [out]) == before


@pytest.mark.slow
def test_two_entries_one_name_through_two_processes(setup, tmp_path):
    listing, expected = _colliding_list(tmp_path)
    out, log = tmp_path / 'out', tmp_path / 'two.log'
    env = dict(run_env(setup['tmp']), PYTHON=sys.executable,
               PORT=str(free_port()))
    before = tree_state(tmp_path, [out, log])
    proc = subprocess.Popen(
        ['bash', str(ROOT / 'tools' / 'dist_infer.sh'), '2', str(listing),
         '--out-dir', str(out), *setup['pose_args']], env=env,
        stdout=open(log, 'w'), stderr=subprocess.STDOUT, cwd=str(ROOT),
        start_new_session=True)
    assert _wait(proc, log) == 0, tail(log)
    _check_collision_outputs(out, expected)
    assert log.read_text().count('has the output name') == 1  # rank 0
    assert tree_state(tmp_path, [out, log]) == before


def test_tampered_manifest_records_are_redone(setup, tmp_path):
    """``ok`` records naming no output, or outputs outside the output
    folder, do not make a re-run skip their inputs: they are redone, one
    line says so, and nothing outside the run is touched."""
    out = tmp_path / 'run'
    shutil.copytree(setup['ref'], out)
    outside = tmp_path / 'outside.json'
    outside.write_text('{"mine": 1}')
    tampered = {'x': [], 'a/x': ['../outside.json'],
                '000000000139': [str(outside)]}
    lines = []
    for line in (out / 'manifest.jsonl').read_text().splitlines():
        record = json.loads(line)
        if record['name'] in tampered:
            record['outputs'] = tampered[record['name']]
        lines.append(json.dumps(record))
    (out / 'manifest.jsonl').write_text('\n'.join(lines) + '\n')
    before = tree_state(tmp_path, [out])
    with logged_warnings() as messages:
        summary = main([str(setup['data'] / 'inputs.txt'), '--out-dir',
                        str(out)] + setup['args'])
    assert summary['processed'] == 3 and summary['skipped'] == 12
    said = [m for m in messages if 'not trusted' in m]
    assert len(said) == 1 and '3 record(s)' in said[0]
    assert 'their inputs are redone' in said[0]
    _same_as_reference(out, setup)
    assert tree_state(tmp_path, [out]) == before
    assert outside.read_text() == '{"mine": 1}'


def test_bad_coco_results_path_fails_before_any_work(setup, tmp_path,
                                                     capsys):
    """--coco-results naming a folder, or a file under a file, is refused
    at once: no output folder, no model built, nothing written."""
    folder = tmp_path / 'results'
    folder.mkdir()
    plain = tmp_path / 'plain.txt'
    plain.write_text('x')
    out = tmp_path / 'out'
    before = tree_state(tmp_path)
    argv = [str(setup['data'] / 'inputs.txt'), '--out-dir', str(out)] + \
        setup['pose_args']
    with pytest.raises(ValueError, match=f'--coco-results {folder} is a '
                       'folder; give the name of the file'):
        main(argv + ['--coco-results', str(folder)])
    with pytest.raises(OSError, match=f'{plain} is not a folder'):
        main(argv + ['--coco-results', str(plain / 'r.json')])
    with pytest.raises(SystemExit) as end:  # the command line: one line
        cli(argv + ['--coco-results', str(folder)], prog='infer')
    assert str(end.value).startswith('infer: error: --coco-results ')
    assert '\n' not in str(end.value)
    assert not out.exists()
    assert tree_state(tmp_path) == before


def test_listed_names_are_unique(tmp_path):
    """A list entry whose name an earlier entry has gets the smallest free
    suffix: relative and absolute spellings of one name, one file listed
    twice, and an entry whose own name an earlier renaming took; each
    renaming is logged."""
    from sapiens_mm.apis.inferencers.utils import iter_sources
    base = tmp_path / 'L'
    for rel in ('x.jpg', 'x_1.jpg', 'abs/y.jpg'):
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_bytes(b'jpeg')
    far = tmp_path / 'far' / 'x.jpg'
    far.parent.mkdir()
    far.write_bytes(b'jpeg')
    far_rel = str(far).lstrip('/')
    (base / far_rel).parent.mkdir(parents=True)
    (base / far_rel).write_bytes(b'jpeg')
    listing = base / 'list.txt'
    listing.write_text('\n'.join(
        [far_rel, str(far), 'x.jpg', 'x.jpg', 'x_1.jpg', str(far)]))
    with logged_warnings() as messages:
        names = [s.name for s in iter_sources([str(listing)])]
    stem = far_rel[:-4]
    # first come, first named: the listing is streamed, not held
    assert names == [stem, f'{stem}_1', 'x', 'x_1', 'x_1_1', f'{stem}_2']
    assert len([m for m in messages if 'has the output name' in m]) == 4


def test_rank_timeout_from_the_flag_then_the_environment(setup, tmp_path,
                                                         monkeypatch):
    """--rank-timeout, else SAPIENS_MM_RANK_TIMEOUT, sets the silence that
    makes a rank lost (and the heartbeat, a fifth of it, which the progress
    file shows); a value that is not a positive number is refused before
    any work."""
    listing = tmp_path / 'one.txt'
    cv2.imwrite(str(tmp_path / 'p.png'), image(40, 32, 3))
    listing.write_text('p.png\n')
    out = tmp_path / 'out'
    argv = [str(listing), '--out-dir', str(out)] + setup['pose_args']

    def heartbeat():
        return json.loads((out / 'manifests' / 'progress.rank00000.json'
                           ).read_text())['heartbeat_s']

    monkeypatch.setenv('SAPIENS_MM_RANK_TIMEOUT', '20')
    main(argv + ['--rank-timeout', '7', '--overwrite'])
    assert heartbeat() == pytest.approx(7 / 5)
    main(argv + ['--overwrite'])
    assert heartbeat() == pytest.approx(20 / 5)
    monkeypatch.delenv('SAPIENS_MM_RANK_TIMEOUT')
    main(argv + ['--overwrite'])
    assert heartbeat() == pytest.approx(10)  # 600 s: beats capped at 10 s
    shutil.rmtree(out)
    with pytest.raises(ValueError, match='--rank-timeout 0.0 is not a '
                       'positive number of seconds'):
        main(argv + ['--rank-timeout', '0'])
    monkeypatch.setenv('SAPIENS_MM_RANK_TIMEOUT', 'soon')
    with pytest.raises(ValueError, match=r"\$SAPIENS_MM_RANK_TIMEOUT='soon' is "
                       'not a positive number'):
        main(argv)
    assert not out.exists()
