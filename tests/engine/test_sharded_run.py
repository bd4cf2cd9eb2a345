"""The engine of sharded runs: the split of the inputs, the manifests'
merge, commits and done-set, the listing walked once, lost ranks and their
leftovers, and a million-entry list in bounded memory.

Several ranks run in one process as threads, their one collective call
(the run id's broadcast) played by :class:`_Group`."""
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from attack_helpers import tree_state
from cluster_helpers import ROOT, run_env
from log_helpers import logged_warnings
from tool_helpers import load_tool

from sapiens_mm.engine.fileio import atomic_write
from sapiens_mm.engine.sharded import (DoneIndex, ListedItem, ListingFailed,
                                       Outcome, RanksLost, ShardedRun,
                                       merge_manifests, name_hash,
                                       unfinished_ranks)
from sapiens_mm.engine.sharded import run as run_module


def test_shards_split_every_input_once_whatever_the_order():
    names = [f'd{i % 7}/img{i}' for i in range(300)]
    for world in (1, 2, 3, 5):
        runs = [ShardedRun('unused', {}, rank, world) for rank in range(world)]
        shards = [{n for n in names if r.mine(n)} for r in runs]
        assert set().union(*shards) == set(names)
        assert sum(map(len, shards)) == len(names)  # disjoint
        shuffled = random.Random(0).sample(names, len(names))
        assert [{n for n in shuffled if r.mine(n)} for r in runs] == shards
        if world > 1:  # no rank is left idle by the hash
            assert min(map(len, shards)) > len(names) / world / 2


def _rec(name, status, outputs=()):
    return json.dumps(dict(input=f'/data/{name}.jpg', name=name, kind='image',
                           status=status, outputs=list(outputs)))


COMMIT = json.dumps({'synced': 1})


def test_merge_keeps_each_input_once_with_its_latest_record(tmp_path):
    out = tmp_path
    (out / 'manifests').mkdir()
    (out / 'manifest.jsonl').write_text(
        _rec('a', 'failed') + '\n' + _rec('b', 'ok', ['pose/b.json']) + '\n')
    run1 = out / 'manifests' / '20260101T000000-aaaaaa.rank00000.jsonl'
    run1.write_text(_rec('a', 'ok', ['pose/a.json']) + '\n' + COMMIT + '\n' +
                    _rec('c', 'failed') + '\n' + '{"input": "/data/d.j')
    # a rank killed before its first commit: every record is checked
    run2 = out / 'manifests' / '20260102T000000-bbbbbb.rank00001.jsonl'
    run2.write_text(_rec('c', 'ok', ['pose/c.json']) + '\n' +
                    _rec('e', 'ok', ['pose/e.json']) + '\n' +
                    _rec('f', 'ok', ['pose/f.json']) + '\n')
    (out / 'pose').mkdir()
    (out / 'pose' / 'c.json').write_text('{}')
    (out / 'pose' / 'f.json').write_text('')  # cut by a machine crash
    done = DoneIndex(str(out))
    # committed records are trusted without a look at their outputs (a's
    # and b's are absent); after the last commit: outputs on disk, not
    # empty
    assert {n for n in 'abcdef' if name_hash(n) in done} == {'a', 'b', 'c'}
    counts = merge_manifests(str(out))
    assert counts == {'ok': 5}
    merged = [json.loads(line)
              for line in (out / 'manifest.jsonl').read_text().splitlines()]
    assert {r['name']: r['status'] for r in merged} == {
        'a': 'ok', 'b': 'ok', 'c': 'ok', 'e': 'ok', 'f': 'ok'}  # no "d"
    assert sorted(p.name for p in (out / 'manifests').iterdir()) == []


def test_commit_line_follows_the_file_system_sync(tmp_path, monkeypatch):
    """A commit line is written only after the records before it (and so
    the outputs they name, written earlier) went through one file-system
    sync; closing commits and fsyncs the rest; no commit without new
    records."""
    from sapiens_mm.engine.sharded import manifest
    path = tmp_path / 'm' / 'r.jsonl'
    seen = []
    monkeypatch.setattr(manifest, 'sync_file_system',
                        lambda p: seen.append(path.read_text()))
    writer = manifest.ManifestWriter(str(path), sync_interval=3600)
    writer.write(dict(name='a'))
    writer.write(dict(name='b'))
    writer.sync()
    writer.sync()  # nothing new: no second commit
    writer.write(dict(name='c'))
    writer.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines == [dict(name='a'), dict(name='b'), {'synced': 2},
                     dict(name='c'), {'synced': 3}]
    # at each sync, the records were in the file and their commit was not
    assert [json.loads(text.splitlines()[-1]) for text in seen] == [
        dict(name='b'), dict(name='c')]


def test_sync_file_system_really_syncs(tmp_path):
    """The one call behind every commit: syncfs on Linux (no error on a
    real folder; an error names the path)."""
    from sapiens_mm.engine.sharded import sync_file_system
    (tmp_path / 'x').write_text('data')
    sync_file_system(str(tmp_path / 'x'))
    with pytest.raises(OSError):
        sync_file_system(str(tmp_path / 'missing'))


def test_tampered_ok_records_are_not_trusted(tmp_path):
    """An "ok" record naming no output, or an output outside the output
    folder, does not make its input skipped; one line says so."""
    out = tmp_path
    (out / 'pose').mkdir()
    for n in 'gh':
        (out / 'pose' / f'{n}.json').write_text('{}')
    (out / 'manifest.jsonl').write_text('\n'.join([
        _rec('g', 'ok', ['pose/g.json']),
        _rec('x', 'ok', []),
        _rec('y', 'ok', ['../outside.json']),
        _rec('z', 'ok', ['/etc/passwd']),
        _rec('w', 'ok', ['pose/../../w.json']),
        _rec('v', 'ok', ['manifests/run.json']),
        json.dumps(dict(name='u', status='ok', outputs='pose/g.json')),
    ]) + '\n')
    with logged_warnings() as messages:
        done = DoneIndex(str(out))
    assert [n for n in 'gxyzwvu' if name_hash(n) in done] == ['g']
    assert done.untrusted == 6
    lines = [m for m in messages if 'not trusted' in m]
    assert len(lines) == 1
    assert "6 record(s)" in lines[0] and "manifest.jsonl:2 ('x'" in lines[0]
    assert 'redone' in lines[0]
    # curation records carry no outputs: trusted there
    assert name_hash('x') in DoneIndex(str(out), require_outputs=False)


class _Group:
    """The broadcast of a process group, for ranks run as threads of this
    process: rank 0's state reaches the others."""

    def __init__(self, state=None):
        self.local = threading.local()
        self.state = state
        self.ready = threading.Event()
        if state is not None:
            self.ready.set()

    def broadcast(self, objects, src=0):
        if self.local.rank == 0:
            self.state = list(objects)
            self.ready.set()
        else:
            assert self.ready.wait(60)
            objects[:] = self.state


class _Listing:
    """An input listing that counts how often it is walked."""

    def __init__(self, items):
        self.items, self.walks = items, 0

    def __iter__(self):
        self.walks += 1
        yield from self.items


class _Untouched:
    """The listing as a rank other than 0 gets it: never walked."""

    def __iter__(self):
        raise AssertionError('a rank other than 0 walked the listing')


def _inputs(folder: Path, n: int):
    folder.mkdir(parents=True, exist_ok=True)
    items = []
    for i in range(n):
        path = folder / f'd{i % 3}' / f'img{i}.jpg'
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b'x' * (i + 1))
        items.append(ListedItem(f'd{i % 3}/img{i}', str(path), 'image'))
    return items


def _process(out: Path):
    """Writes one output per input (its size), as an inferencer does."""
    def process(batch):
        outcomes = []
        for item in batch:
            target = out / 'out' / f'{item.name}.txt'
            atomic_write(str(os.path.getsize(item.path)), target,
                         durable=False)
            outcomes.append(Outcome('ok', [str(target)], frames=1))
        return outcomes
    return process


def _rank_thread(group, results, rank, out, listing, timeout=20.0,
                 **kwargs):
    def body():
        group.local.rank = rank
        try:
            run = ShardedRun(str(out), {'model': 'm'}, rank, 2,
                             progress_interval=0, rank_timeout=timeout,
                             **kwargs)
            run.start()
            run.run(listing, _process(out), batch_size=4)
            results[rank] = run.finish(poll_s=0.05)
        except BaseException as e:  # noqa: BLE001 (checked by the test)
            results[rank] = e
    thread = threading.Thread(target=body)
    thread.start()
    return thread


def _two_ranks(out, listing, monkeypatch):
    group = _Group()
    monkeypatch.setattr(run_module, 'broadcast_object_list', group.broadcast)
    results = {}
    threads = [_rank_thread(group, results, 0, out, listing),
               _rank_thread(group, results, 1, out, _Untouched())]
    for t in threads:
        t.join(120)
    for r in (0, 1):
        if isinstance(results.get(r), BaseException):
            raise results[r]
    return results


def test_two_ranks_list_once_and_resume_from_rank0s_reading(
        tmp_path, monkeypatch):
    """Rank 0 alone walks the listing and reads the manifests; each rank
    processes the inputs that hash to it, all of them once; the re-run
    skips everything, each rank learning its count from rank 0."""
    items = _inputs(tmp_path / 'data', 40)
    out = tmp_path / 'out'
    listing = _Listing(items)
    summary = _two_ranks(out, listing, monkeypatch)[0]
    assert listing.walks == 1
    share = {r: sum(name_hash(i.name) % 2 == r for i in items) for r in (0, 1)}
    assert min(share.values()) > 0
    assert summary['processed'] == 40 and summary['failed'] == 0
    assert {p['rank']: p['processed'] for p in summary['ranks']} == share
    for item in items:  # each output holds its own input's size
        assert (out / 'out' / f'{item.name}.txt').read_text() == str(
            os.path.getsize(item.path))
    records = [json.loads(line) for line in
               (out / 'manifest.jsonl').read_text().splitlines()]
    assert sorted(r['name'] for r in records) == sorted(i.name for i in items)
    assert {r['rank'] for r in records if name_hash(r['name']) % 2} == {1}
    assert sorted(p.name for p in (out / 'manifests').iterdir()) == [
        'progress.rank00000.json', 'progress.rank00001.json', 'run.json']
    again = _two_ranks(out, _Listing(items), monkeypatch)[0]
    assert again['processed'] == 0 and again['skipped'] == 40
    assert {p['rank']: p['skipped'] for p in again['ranks']} == share


def test_a_listing_error_reaches_every_rank(tmp_path, monkeypatch):
    """Rank 0's listing fails half-way (a bad list line): rank 0 raises the
    error itself, the other ranks the same message from rank 0."""
    items = _inputs(tmp_path / 'data', 9)

    class Broken:
        def __iter__(self):
            yield from items
            raise ValueError('list.jsonl:10: expected a JSON string')

    group = _Group()
    monkeypatch.setattr(run_module, 'broadcast_object_list', group.broadcast)
    results = {}
    threads = [_rank_thread(group, results, 0, tmp_path / 'out', Broken()),
               _rank_thread(group, results, 1, tmp_path / 'out',
                            _Untouched())]
    for t in threads:
        t.join(120)
    assert type(results[0]) is ValueError
    assert str(results[0]) == 'list.jsonl:10: expected a JSON string'
    assert isinstance(results[1], ListingFailed)
    assert str(results[1]) == ('rank 0 could not list the inputs: '
                               'list.jsonl:10: expected a JSON string')


def test_shard_reader_takes_whole_lines_only(tmp_path):
    """A shard file read while rank 0 appends (a line cut, or seen with a
    hole on a network file system): the reader waits for the line; a line
    that never becomes an entry stops it after ``settle_s``."""
    from sapiens_mm.engine.sharded.listing import read_shard
    path = tmp_path / 'shard.jsonl'
    path.write_bytes(b'["a", "/d/a.jpg", "image"]\n["b", "/d/b')
    appends = [b'.jpg", "image"]\n', b'{"end": true, "skipped": 4}\n']
    ends = []

    def keep_waiting():  # rank 0 appends the rest, a piece at a time
        with open(path, 'ab') as f:
            f.write(appends.pop(0))
        return True

    items = list(read_shard(str(path), ListedItem, ends.append,
                            keep_waiting))
    assert items == [ListedItem('a', '/d/a.jpg', 'image'),
                     ListedItem('b', '/d/b.jpg', 'image')]
    assert ends == [4] and appends == []
    path.write_bytes(b'["a", "/d/a.jpg", "image"]\n\0\0\0\n')
    with pytest.raises(ListingFailed, match='byte 27 is not an entry'):
        list(read_shard(str(path), ListedItem, ends.append, lambda: True,
                        poll_s=0.01, settle_s=0.2))


def _progress(run_id, rank, **fields):
    progress = dict(run_id=run_id, rank=rank, world_size=2, pid=4242,
                    host='nodeB', beat=7, heartbeat_s=1.0, ok=3, failed=0,
                    skipped=0, frames=3, seconds=1.0, in_flight=[],
                    in_flight_names=[], last=None, stopped=False, error=None,
                    finished=False)
    progress.update(fields)
    return progress


def _write_progress(out: Path, progress: dict) -> None:
    path = out / 'manifests' / f'progress.rank{progress["rank"]:05d}.json'
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(progress))


TIMEOUT = 1.5  # seconds of silence that make a rank lost in these tests


def test_rank0_stops_on_a_silent_rank_and_names_its_inputs(
        tmp_path, monkeypatch):
    """Rank 1 died mid-batch (its progress file no longer changes): rank 0
    ends its own share, waits TIMEOUT seconds of silence, and stops with
    one message naming rank 1, where it ran and its in-flight inputs; one
    plain process then resumes with rank 1's share only."""
    items = _inputs(tmp_path / 'data', 24)
    out = tmp_path / 'out'
    monkeypatch.setattr(run_module, 'broadcast_object_list',
                        lambda objects, src=0: None)
    run = ShardedRun(str(out), {}, 0, 2, progress_interval=0,
                     rank_timeout=TIMEOUT)
    run.start()
    dead = [str(tmp_path / 'data' / 'q.png'), str(tmp_path / 'r.png')]
    _write_progress(out, _progress(run.run_id, 1, in_flight=dead,
                                   in_flight_names=['q', 'r']))
    run.run(items, _process(out), batch_size=4)
    start = time.monotonic()
    with pytest.raises(RanksLost) as lost:
        run.finish(poll_s=0.05)
    waited = time.monotonic() - start
    assert lost.value.ranks == [1]
    message = str(lost.value)
    assert '\n' not in message
    assert 'rank 1 (pid 4242 on nodeB)' in message
    assert re.search(r'no heartbeat for \d+ s \(--rank-timeout 1\.5\)',
                     message)
    assert f'while processing {dead[0]}, {dead[1]}' in message
    assert 'run the same command again' in message
    # waited for the silence, and not much longer (slack: a busy machine)
    assert TIMEOUT <= waited < TIMEOUT + 15
    assert not (out / 'summary.json').exists()
    assert unfinished_ranks(str(out)) == [
        f'rank 1 (pid 4242 on nodeB) did not finish (killed or crashed) '
        f'while processing {dead[0]}, {dead[1]}; 3 ok, 0 failed recorded']
    mine = sum(name_hash(i.name) % 2 == 0 for i in items)
    resume = ShardedRun(str(out), {}, 0, 1, progress_interval=0)
    resume.start()
    resume.run(items, _process(out), batch_size=4)
    summary = resume.finish()
    assert summary['skipped'] == mine
    assert summary['processed'] == len(items) - mine


def test_rank0_stops_at_once_on_a_rank_that_failed(tmp_path, monkeypatch):
    """A rank that stopped on an error says so in its progress file: no
    need to wait for its silence."""
    out = tmp_path / 'out'
    monkeypatch.setattr(run_module, 'broadcast_object_list',
                        lambda objects, src=0: None)
    run = ShardedRun(str(out), {}, 0, 2, progress_interval=0,
                     rank_timeout=600)
    run.start()
    _write_progress(out, _progress(run.run_id, 1, error='disk full',
                                   last='/data/z.png'))
    run.run([], _process(out))
    with pytest.raises(RanksLost, match=r'rank 1 \(pid 4242 on nodeB\) '
                       'failed: disk full after /data/z.png'):
        run.finish(poll_s=0.05)


def test_a_rank_waiting_for_inputs_stops_when_rank0_is_lost(
        tmp_path, monkeypatch):
    """Rank 0 (which lists the inputs) went silent before rank 1's shard
    ended: rank 1 stops after TIMEOUT seconds, naming rank 0."""
    out = tmp_path / 'out'
    run_id = '20260101T000000-abcdef'
    group = _Group([run_id, None])
    group.local.rank = 1
    monkeypatch.setattr(run_module, 'broadcast_object_list', group.broadcast)
    _write_progress(out, _progress(run_id, 0, host='node0',
                                   in_flight=['/data/a.png']))
    run = ShardedRun(str(out), {}, 1, 2, progress_interval=0,
                     rank_timeout=TIMEOUT)
    run.start()
    start = time.monotonic()
    with pytest.raises(RanksLost) as lost:
        run.run(_Untouched(), _process(out))
    assert TIMEOUT <= time.monotonic() - start < TIMEOUT + 15
    assert lost.value.ranks == [0]
    assert 'from rank 0, which lists them: rank 0 (pid 4242 on node0) no ' \
        'heartbeat' in str(lost.value)
    # its own progress file says why it stopped
    own = json.loads((out / 'manifests' / 'progress.rank00001.json'
                      ).read_text())
    assert 'rank 0' in own['error'] and not own['finished']


def test_resume_removes_what_lost_ranks_left_half_written(tmp_path):
    """The temporary files of the in-flight inputs of a rank that did not
    finish (per-frame files, a video's private folder, a killed merge) go;
    a live process's temporary file, those of other inputs and every
    output stay."""
    out = tmp_path / 'out'
    gone = subprocess.Popen(['true'])
    gone.wait()
    dead, alive = gone.pid, os.getpid()
    _write_progress(out, _progress('20260101T000000-abcdef', 1,
                                   in_flight_names=['a/x', 'clip']))
    _write_progress(out, _progress('20260101T000000-abcdef', 0,
                                   finished=True, in_flight_names=['b/y']))
    files = {
        'pose/a/.x.json.tmp%d_0123abcd' % dead: False,
        'seg/a/.x.npy.tmp%d_0123abcd' % dead: False,
        'seg/clip/.000003.npy.tmp%d_00ff00ff' % dead: False,
        'pose/.clip.tmpab_cd123/clip.mp4': False,
        '.manifest.jsonl.tmp%d_deadbeef' % dead: False,
        'manifests/.progress.rank00001.json.tmp%d_0000aaaa' % dead: False,
        'pose/a/.x.json.tmp%d_11111111' % alive: True,  # still writing
        'pose/b/.y.json.tmp%d_22222222' % dead: True,  # not in flight
        'pose/.other.tmpab_cd123/other.mp4': True,
        'pose/a/x.json': True,
        'seg/clip/000002.npy': True,
    }
    for rel in files:
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text('partial')
    run = ShardedRun(str(out), {}, 0, 1, progress_interval=0)
    run.start()
    assert {rel: (out / rel).exists() for rel in files} == files
    assert not (out / 'pose' / '.clip.tmpab_cd123').exists()


def test_status_says_one_line_per_malformed_progress_file(tmp_path, capsys):
    """tools/sharded_status.py on progress files that are not (a JSON list,
    a missing field, a cut file, a wrong type): one line each naming the
    file and what is wrong, never "None"; the valid ones are reported;
    nothing is written."""
    status = load_tool('sharded_status')
    out = tmp_path / 'out'
    folder = out / 'manifests'
    folder.mkdir(parents=True)
    bad = {'progress.rank00000.json': '[1, 2]',
           'progress.rank00001.json': json.dumps({'rank': 1}),
           'progress.rank00002.json': '{"run_id": "2026',
           'progress.rank00003.json': json.dumps(_progress('r', 3, ok='7'))}
    for name, text in bad.items():
        (folder / name).write_text(text)
    before = tree_state(tmp_path)
    assert status.main([str(out)]) == 2
    err = capsys.readouterr()
    lines = err.err.splitlines()
    assert [ln.split(':')[0] for ln in lines] == [
        str(folder / name) for name in sorted(bad)]
    assert 'holds a JSON list, not an object' in lines[0]
    assert 'has no "run_id"' in lines[1]
    assert 'cannot be read as JSON' in lines[2]
    assert '"ok" is \'7\'' in lines[3]
    assert all('not a progress file of a sharded run' in ln and
               ln.endswith('ignored.') for ln in lines)
    assert 'None' not in err.out + err.err
    assert tree_state(tmp_path) == before
    # beside a valid one: its state, and the problem lines
    _write_progress(out, _progress('20260101T000000-abcdef', 4,
                                   in_flight=['/data/q.png']))
    before = tree_state(tmp_path)
    assert status.main([str(out)]) == 1
    err = capsys.readouterr()
    assert len(err.err.splitlines()) == 4 and 'None' not in err.out
    assert err.out.splitlines()[-1] == (
        'rank 4 (pid 4242 on nodeB) did not finish (killed or crashed) '
        'while processing /data/q.png; 3 ok, 0 failed recorded')
    assert tree_state(tmp_path) == before


#: Peak RSS growth allowed while 1,000,000 list entries are streamed,
#: sharded, recorded and merged (measured: 52 MB, the merge's 8 bytes per
#: record plus numpy's sort buffers). Holding the listing as sources would
#: take about 280 MB (measured: 56 MB per 200,000).
RSS_BOUND_MB = 96

MILLION = '''
import json, resource, sys
from sapiens_mm.apis.inferencers.utils.sources import iter_sources
from sapiens_mm.engine.sharded import Outcome, ShardedRun
out, listing = sys.argv[1], sys.argv[2]
run = ShardedRun(out, {}, 0, 1, progress_interval=0)
run.start()
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
run.run(iter_sources([listing]),
        lambda batch: [Outcome('ok', frames=1) for _ in batch], 8)
summary = run.finish()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps(dict(grown_mb=(peak - base) / 1024, summary=summary)))
'''


@pytest.mark.slow
def test_million_entry_list_in_bounded_memory(tmp_path):
    n, present = 1_000_000, (0, 123_456, 999_999)
    for i in present:
        (tmp_path / 'imgs').mkdir(exist_ok=True)
        (tmp_path / 'imgs' / f'{i:07d}.jpg').write_bytes(b'jpeg')
    with open(tmp_path / 'list.txt', 'w') as f:
        f.writelines(f'imgs/{i:07d}.jpg\n' for i in range(n))
    out = tmp_path / 'out'
    proc = subprocess.run(
        [sys.executable, '-c', MILLION, str(out), str(tmp_path / 'list.txt')],
        env=run_env(tmp_path), cwd=str(ROOT), capture_output=True, text=True,
        timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    summary = result['summary']
    assert summary['processed'] == len(present)
    assert summary['failed'] == n - len(present)  # missing: recorded failed
    with open(out / 'manifest.jsonl') as f:
        assert sum(1 for _ in f) == n
    assert result['grown_mb'] < RSS_BOUND_MB, result
