"""The engine of sharded runs: the split of the inputs, the manifests'
merge and done-set, and a million-entry list in bounded memory."""
import json
import random
import subprocess
import sys

import pytest
from cluster_helpers import ROOT, run_env

from sapiens_mm.engine.sharded import (DoneIndex, ShardedRun, merge_manifests,
                                       name_hash)


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


def test_merge_keeps_each_input_once_with_its_latest_record(tmp_path):
    out = tmp_path
    (out / 'manifests').mkdir()
    (out / 'manifest.jsonl').write_text(
        _rec('a', 'failed') + '\n' + _rec('b', 'ok', ['pose/b.json']) + '\n')
    run1 = out / 'manifests' / '20260101T000000-aaaaaa.rank00000.jsonl'
    run1.write_text(_rec('a', 'ok', ['pose/a.json']) + '\n' +
                    _rec('c', 'failed') + '\n' + '{"input": "/data/d.j')
    run2 = out / 'manifests' / '20260102T000000-bbbbbb.rank00001.jsonl'
    run2.write_text(_rec('c', 'ok', ['pose/c.json']) + '\n')
    (out / 'pose').mkdir()
    (out / 'pose' / 'a.json').write_text('{}')
    (out / 'pose' / 'c.json').write_text('{}')
    # done: recorded ok and its outputs on disk (b's output is gone)
    done = DoneIndex(str(out))
    assert name_hash('a') in done and name_hash('c') in done
    assert name_hash('b') not in done and name_hash('d') not in done
    only_rank = DoneIndex(str(out), keep=lambda h: h == name_hash('c'))
    assert len(only_rank) == 1
    counts = merge_manifests(str(out))
    assert counts == {'ok': 3}
    merged = [json.loads(line)
              for line in (out / 'manifest.jsonl').read_text().splitlines()]
    assert {r['name']: r['status'] for r in merged} == {
        'a': 'ok', 'b': 'ok', 'c': 'ok'}  # the cut line "d" is dropped
    assert sorted(p.name for p in (out / 'manifests').iterdir()) == []


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
