"""``load_from='hf://...'`` in a job of two simulated nodes: two
``torchrun`` launches on this machine (static rendezvous, gloo), each node
with a Hugging Face cache of its own, against the loopback Hub. Each node's
local rank 0 downloads into its node's cache while the node's other rank
waits; when one node cannot reach the Hub, every rank of both nodes exits
with the same one line within a bounded time."""
import io
import json
import os
import socket
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest
import torch
from cluster_helpers import free_port, run_env, torchrun_node_cmd
from fake_hub import FakeHub

from sapiens_mm.zoo.dist_fetch import _gather
from sapiens_mm.zoo.hub import HubError

HELPERS = Path(__file__).resolve().parents[1] / 'helpers'
REPO, FILE = 'someone/linear', 'epoch_1.pth'
URL = f'hf://{REPO}/{FILE}'
#: Seconds any rank may wait for news from the others in these tests.
DIST_TIMEOUT = 20
#: Two launches of three workers on a loaded 2-core machine: the imports
#: take most of it.
BOUND = 240


def checkpoint():
    torch.manual_seed(1)
    fc = torch.nn.Linear(4, 3)
    buffer = io.BytesIO()
    torch.save({'state_dict': {'fc.weight': fc.weight.data,
                               'fc.bias': fc.bias.data}}, buffer)
    return fc.weight.tolist(), buffer.getvalue()


def run_two_nodes(tmp_path, endpoints, nprocs=(2, 1)):
    """Start node 0 and node 1 (``nprocs`` workers each), wait for both;
    ``[(exit code, worker error lines)]`` per node and the seconds taken."""
    port = free_port()
    procs = []
    start = time.monotonic()
    for node, (endpoint, nproc) in enumerate(zip(endpoints, nprocs)):
        out = tmp_path / f'node{node}'
        (out / 'logs').mkdir(parents=True)
        env = run_env(HELPERS)
        env.update(HF_HOME=str(out / 'hf-home'), HF_ENDPOINT=endpoint,
                   HF_HUB_DISABLE_PROGRESS_BARS='1',
                   SAPIENS_MM_HUB_DIST_TIMEOUT=str(DIST_TIMEOUT),
                   SAPIENS_MM_HUB_TIMEOUT='10')
        for var in ('HF_HUB_OFFLINE', 'HF_HUB_CACHE'):
            env.pop(var, None)
        cmd = torchrun_node_cmd(HELPERS / 'hf_load_worker.py', URL, str(out),
                                nnodes=2, node_rank=node, nproc=nproc,
                                port=port)
        # each worker's stderr in a file of its own (torchrun's own report
        # of a failed worker goes to the launcher's stderr)
        cmd[3:3] = ['--log-dir', str(out / 'logs'), '--redirects', '2']
        log = open(out / 'torchrun.log', 'w')
        procs.append((subprocess.Popen(cmd, env=env, stdout=log,
                                       stderr=subprocess.STDOUT,
                                       start_new_session=True), out))
    results = []
    for proc, out in procs:
        try:
            rc = proc.wait(timeout=BOUND)
        except subprocess.TimeoutExpired:
            for p, _ in procs:
                os.killpg(p.pid, 9)
            raise AssertionError(
                f'hung; log:\n{(out / "torchrun.log").read_text()[-3000:]}')
        lines = [line for f in sorted((out / 'logs').rglob('stderr.log'))
                 for line in f.read_text().splitlines()]
        results.append((rc, lines, out))
    return results, time.monotonic() - start


def test_each_node_downloads_once_into_its_own_cache(tmp_path):
    weight, data = checkpoint()
    with FakeHub() as hub:
        hub.add_file(REPO, FILE, data)
        results, _ = run_two_nodes(tmp_path, [hub.endpoint] * 2)
        for rc, lines, out in results:
            assert rc == 0, (out / 'torchrun.log').read_text()[-3000:]
        assert len(hub.downloads(FILE)) == 2  # one per node
    for node, ranks in ((0, (0, 1)), (1, (2, ))):
        cache = tmp_path / f'node{node}' / 'hf-home' / 'hub'
        for rank in ranks:
            got = json.loads((tmp_path / f'node{node}' /
                              f'rank{rank}.json').read_text())
            assert got['weight'] == weight
            assert Path(got['path']).is_relative_to(cache)


def test_a_node_without_the_hub_fails_every_rank_with_one_line(tmp_path):
    _, data = checkpoint()
    with socket.socket() as s:  # a port nothing listens on
        s.bind(('127.0.0.1', 0))
        dead = f'http://127.0.0.1:{s.getsockname()[1]}'
    with FakeHub() as hub:
        hub.add_file(REPO, FILE, data)
        results, seconds = run_two_nodes(tmp_path, [hub.endpoint, dead])
    assert seconds < BOUND
    errors = set()
    for rc, lines, out in results:
        assert rc != 0
        # each worker's stderr: its one line
        assert len(lines) == (2 if out.name == 'node0' else 1), lines
        errors.update(lines)
    (line, ) = errors  # the same line on every rank
    # named: node 1's fetching rank, what failed, what to do
    assert line.startswith(f'hf_load_worker: error: rank 2: {REPO}/{FILE}: '
                           'could not reach the Hub'), line
    assert not (tmp_path / 'node0' / 'rank0.json').exists()


def test_a_rank_that_never_reports_is_named_after_the_timeout():
    from torch.distributed import TCPStore
    store = TCPStore('127.0.0.1', 0, is_master=True,
                     timeout=timedelta(seconds=30), wait_for_workers=False)
    store.set('call/fetched/0', '')  # rank 1 never comes
    start = time.monotonic()
    with pytest.raises(HubError) as e:
        _gather(store, ['call/fetched/0', 'call/fetched/1'], 'call/beats',
                1.0, URL)
    assert 1.0 <= time.monotonic() - start < 10
    assert str(e.value) == (
        f'{URL}: rank 1 did not report for 1 s (it died or hangs: see its '
        'log; SAPIENS_MM_HUB_DIST_TIMEOUT sets the limit).')
