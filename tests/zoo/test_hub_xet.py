"""Files of Xet-backed repositories through ``hf_xet``, in a child process
the download can kill, against the loopback Hub (tests/helpers/fake_hub.py:
``X-Xet-*`` answers, the token route, a CAS route).

A real Xet CAS server cannot run here, so most tests put a stand-in
``hf_xet`` (tests/helpers/xet_standin.py, copied as ``hf_xet.py``) first on
the child's ``PYTHONPATH``: it has ``hf_xet``'s public download API and,
per mode, writes the right bytes, wrong ones, more than announced, or
trickles without end. Two tests run the real ``hf_xet`` against a CAS route
that never answers or does not know the file.

Each test checks what a user relies on: the right bytes end in the cache
through the Xet route (the stand-in recorded its call, the Hub's HTTP file
route was never asked), anything else is refused in one line with nothing
in the cache, a limit passed kills the child, a Xet route that cannot be
used falls back to HTTP, and nothing is written outside the repository's
cache folder."""
import hashlib
import importlib
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from attack_helpers import tree_state
from fake_hub import FakeHub

from sapiens_mm.zoo.cards import find_card
from sapiens_mm.zoo.hub import (
    CorruptDownloadError,
    HubAnswerError,
    HubTimeoutError,
    fetch,
)

ROOT = Path(__file__).resolve().parents[2]
HELPERS = ROOT / 'tests' / 'helpers'
NAME, REPO, FILE = 'sapiens2-pose-0.4b', 'facebook/sapiens2-pose-0.4b', \
    'sapiens2_0.4b_pose.safetensors'
REPO_DIR = 'models--facebook--sapiens2-pose-0.4b'
#: The user's Hub token: sent to the Hub's token route, never to the CAS.
HF_TOKEN = 'hf_user_secret'
#: How long a test whose transfer must be cut may take at most (seconds):
#: its limit, a child's start and a poll past it, on a loaded 2-core
#: machine.
BOUND = 20.0
#: Whether the real hf_xet is installed (two tests run it).
REAL_HF_XET = importlib.util.find_spec('hf_xet') is not None


def running(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie left to a container's init
    does not count)."""
    try:
        state = Path(f'/proc/{pid}/stat').read_text().rsplit(')', 1)[1]
    except OSError:
        return False
    return state.split()[0] not in ('Z', 'X')


@pytest.fixture
def world(tmp_path, monkeypatch):
    """The loopback Hub as HF_ENDPOINT, serving a Xet-backed file; the
    cache (and hf_xet's default folder, HF_HOME/xet) inside a tree of
    sentinel files; the stand-in hf_xet first on the child's PYTHONPATH
    (and findable by the parent, whether or not the real one is
    installed); a generous time limit (tests of the limits set their
    own)."""
    root = tmp_path / 'root'
    home = root / 'home' / 'hf'
    cache = home / 'hub'
    for path, data in ((root / 'home' / '.bashrc', b'# shell'),
                       (cache / 'models--other--repo' / 'blobs' / ('a' * 64),
                        b'another model')):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    standin = tmp_path / 'standin'
    standin.mkdir()
    shutil.copy(HELPERS / 'xet_standin.py', standin / 'hf_xet.py')
    with FakeHub() as hub:
        monkeypatch.setenv('HF_ENDPOINT', hub.endpoint)
        monkeypatch.setenv('HF_HOME', str(home))
        monkeypatch.setenv('HF_HUB_CACHE', str(cache))
        monkeypatch.setenv('HF_TOKEN', HF_TOKEN)
        monkeypatch.setenv('SAPIENS_MM_HUB_TIMEOUT', '60')
        monkeypatch.setenv('SAPIENS_MM_HUB_MIN_SPEED', str(1 << 30))
        monkeypatch.setenv('PYTHONPATH', os.pathsep.join(
            [str(standin)] + [p for p in [os.environ.get('PYTHONPATH')]
                              if p]))
        monkeypatch.setenv('XET_STANDIN_RECORD', str(tmp_path / 'calls'))
        monkeypatch.setenv('XET_STANDIN_MODE', 'right')
        monkeypatch.syspath_prepend(str(standin))
        for var in ('HF_HUB_OFFLINE', 'TRANSFORMERS_OFFLINE',
                    'HF_HUB_DISABLE_XET', 'HF_XET_CACHE'):
            monkeypatch.delenv(var, raising=False)
        data = os.urandom(300_000)
        hub.add_file(REPO, FILE, data)
        hub.xet_hash = hub.xet(REPO, FILE)
        hub.data, hub.root, hub.cache, hub.standin = data, root, cache, standin
        hub.record = tmp_path / 'calls'
        hub.before = tree_state(root, [cache / REPO_DIR])
        hub.logged = []  # the warnings
        monkeypatch.setattr(
            'sapiens_mm.zoo.hub.print_log', lambda msg, **kw: kw.get(
                'level') == logging.WARNING and hub.logged.append(msg))
        yield hub


def calls(hub) -> list:
    """The downloads the stand-in hf_xet ran."""
    if not hub.record.exists():
        return []
    return [json.loads(line) for line in hub.record.read_text().splitlines()]


def token_requests(hub) -> list:
    return [r for r in hub.requests if 'xet-read-token' in r[1]]


def unchanged(hub) -> None:
    """Nothing outside the repository's cache folder changed (hf_xet's
    default folder HF_HOME/xet included), nothing partial is left."""
    assert tree_state(hub.root, [hub.cache / REPO_DIR]) == hub.before
    assert not [p for p in hub.root.rglob('*')
                if p.name.endswith(('.incomplete', '.link', '.tmp'))]


def blobs(hub) -> list:
    folder = hub.cache / REPO_DIR / 'blobs'
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def nothing_cached(hub) -> None:
    etag = hashlib.sha256(hub.data).hexdigest()
    assert etag not in blobs(hub)
    assert not (hub.cache / REPO_DIR / 'snapshots').exists() or not list(
        (hub.cache / REPO_DIR / 'snapshots').rglob(FILE))


def test_a_xet_file_comes_through_hf_xet_into_the_cache(world, monkeypatch):
    bars = []

    class Bar:
        """huggingface_hub's progress bar, recording what it shows."""

        def __init__(self, total=None, name=None, **kwargs):
            self.total, self.name, self.n = total, name, 0
            bars.append(self)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

        def update(self, n):
            self.n += n

    # huggingface_hub.utils.tqdm is the class of this module
    monkeypatch.setattr(
        importlib.import_module('huggingface_hub.utils.tqdm'), 'tqdm', Bar)
    path = Path(fetch(find_card(NAME)))
    assert path.read_bytes() == world.data
    commit = world.commits[REPO]
    assert path == world.cache / REPO_DIR / 'snapshots' / commit / FILE
    # through the Xet route: the Hub's HTTP file route was never asked
    assert world.downloads(FILE) == []
    (call, ) = calls(world)
    assert call['hash'] == world.xet_hash and call['size'] == len(world.data)
    assert call['endpoint'] == world.endpoint
    assert call['token'] == world.xet_access_token(REPO)
    assert call['token_expiry_unix_secs'] > time.time()
    # the token is renewed at the endpoint's route for the checked commit,
    # with the user's token; the CAS gets only the Xet token
    assert call['token_refresh_url'] == \
        f'{world.endpoint}/api/models/{REPO}/xet-read-token/{commit}'
    assert call['token_refresh_headers']['authorization'] == \
        f'Bearer {HF_TOKEN}'
    assert 'authorization' not in {k.lower() for k in call['custom_headers']}
    assert world.cas_auth == [f'Bearer {world.xet_access_token(REPO)}']
    assert [r[1] for r in token_requests(world)] == [
        f'/api/models/{REPO}/xet-read-token/{commit}']
    # written into a folder of ours beside the blob, hf_xet's own files too
    folder = Path(call['dest']).parent
    assert folder.parent == world.cache / REPO_DIR / 'blobs'
    assert folder.name.endswith('.xet.incomplete')
    assert Path(call['xet_cache']).parent == folder
    # the child's progress moved huggingface_hub's bar
    (bar, ) = bars
    assert (bar.name, bar.total, bar.n) == ('huggingface_hub.xet_get',
                                           len(world.data), len(world.data))
    etag = hashlib.sha256(world.data).hexdigest()
    assert blobs(world) == [etag, f'{etag}.lock']
    assert world.logged == []  # no fallback, no corrupt copy
    unchanged(world)
    from huggingface_hub import scan_cache_dir  # (the sentinel repository
    scan = scan_cache_dir(world.cache)  # has no snapshots: a warning)
    assert not [w for w in scan.warnings if REPO_DIR in str(w)]
    assert [r.repo_id for r in scan.repos] == [REPO]


@pytest.mark.parametrize('mode,problem', [('wrong', 'SHA-256'),
                                          ('short', '299999 bytes instead')])
def test_wrong_xet_bytes_are_refused_and_never_cached(world, monkeypatch,
                                                      mode, problem):
    """Wrong bytes from hf_xet are discarded and the file is downloaded
    again over HTTP; when that copy is corrupt too, one line and nothing
    in the cache."""
    monkeypatch.setenv('XET_STANDIN_MODE', mode)
    world.corrupt(REPO, FILE, 0)  # the HTTP copy: a byte flipped
    with pytest.raises(CorruptDownloadError) as e:
        fetch(find_card(NAME))
    message = str(e.value)
    assert '\n' not in message and 'corrupt twice' in message, message
    assert len(calls(world)) == 1 and len(world.downloads(FILE)) == 1
    (first, second) = world.logged
    assert 'the Xet download is corrupt' in first and problem in first
    assert 'downloading it again over HTTP' in first
    assert 'the download is corrupt' in second
    nothing_cached(world)
    unchanged(world)


def test_a_corrupt_xet_download_is_fetched_again_over_http(world,
                                                           monkeypatch):
    monkeypatch.setenv('XET_STANDIN_MODE', 'wrong')
    path = Path(fetch(find_card(NAME)))
    assert path.read_bytes() == world.data
    assert len(calls(world)) == 1 and len(world.downloads(FILE)) == 1
    (line, ) = world.logged
    assert 'the Xet download is corrupt' in line
    unchanged(world)


@pytest.mark.parametrize('mode,error,text', [
    ('oversize', HubAnswerError, 'more bytes than the 300000 it announced'),
    ('beside', HubAnswerError, 'hf_xet wrote more than 64 MiB'),
    ('trickle', HubTimeoutError, 'did not finish within 3.000'),  # + S/speed
])
def test_a_xet_transfer_past_a_limit_is_killed(world, monkeypatch, mode,
                                               error, text):
    monkeypatch.setenv('XET_STANDIN_MODE', mode)
    monkeypatch.setenv('SAPIENS_MM_HUB_TIMEOUT', '3')
    start = time.monotonic()
    with pytest.raises(error) as e:
        fetch(find_card(NAME))
    took = time.monotonic() - start
    message = str(e.value)
    assert '\n' not in message and text in message, message
    assert took < BOUND
    if mode == 'trickle':
        assert took >= 3  # not before its limit
    (call, ) = calls(world)
    assert not running(call['pid'])  # killed, not left writing
    # a limit passed is not retried, over HTTP or otherwise
    assert world.downloads(FILE) == []
    nothing_cached(world)
    unchanged(world)


def _no_hf_xet(world, monkeypatch):
    (world.standin / 'hf_xet.py').write_text(
        'raise ImportError("no hf_xet here")\n')


FALLBACKS = {
    # hf_xet raises (the CAS refused, unreachable...)
    'hf_xet fails': (lambda w, m: m.setenv('XET_STANDIN_MODE', 'fail'),
                     'hf_xet failed: RuntimeError: Task error'),
    # the child cannot import hf_xet
    'hf_xet does not import': (_no_hf_xet, 'hf_xet does not import'),
    # a server answer that is not a Xet hash
    'hash': (lambda w, m: w.override(REPO, FILE, X_Xet_Hash='../../x'),
             "X-Xet-Hash) '../../x' is not 64 hexadecimal digits"),
    # a mirror without the token route
    'no token route': (lambda w, m: w.xet_token.update(status=404),
                       'its Xet token route answered HTTP 404'),
    # hf_xet's local CAS scheme: a folder as storage
    'local CAS': (lambda w, m: w.xet_token.update(
        {'X-Xet-Cas-Url': 'local:///tmp/x'}),
        "CAS address 'local:///tmp/x' that is not an https or http URL"),
    'CAS with credentials': (lambda w, m: w.xet_token.update(
        {'X-Xet-Cas-Url': 'http://user:pw@127.0.0.1:9/'}), 'CAS address'),
    'empty token': (lambda w, m: w.xet_token.update(
        {'X-Xet-Access-Token': ''}), 'no usable Xet access token'),
    'expiration': (lambda w, m: w.xet_token.update(
        {'X-Xet-Token-Expiration': 'soon'}),
        "a token expiration 'soon' that is not a time"),
}


@pytest.mark.parametrize('case', list(FALLBACKS))
def test_a_xet_route_that_cannot_be_used_falls_back_to_http(
        world, monkeypatch, case):
    arrange, reason = FALLBACKS[case]
    arrange(world, monkeypatch)
    path = Path(fetch(find_card(NAME)))
    assert path.read_bytes() == world.data
    assert len(world.downloads(FILE)) == 1  # over HTTP
    (line, ) = world.logged
    assert '\n' not in line and 'not fetched through hf_xet' in line and \
        reason in line and line.endswith('downloading it over HTTP.'), line
    ran = calls(world)
    if case in ('hf_xet fails', ):
        assert len(ran) == 1
    else:  # hf_xet was never started with a refused answer
        assert ran == []
    if case == 'hash':
        assert token_requests(world) == []
    unchanged(world)


def test_a_token_route_that_never_answers_ends_in_one_line(world,
                                                           monkeypatch):
    monkeypatch.setenv('SAPIENS_MM_HUB_TIMEOUT', '1.5')
    world.xet_token['hang'] = True
    start = time.monotonic()
    with pytest.raises(HubTimeoutError, match='did not finish within 1.5 s'):
        fetch(find_card(NAME))
    assert time.monotonic() - start < BOUND
    assert calls(world) == [] and world.downloads(FILE) == []
    unchanged(world)


@pytest.mark.parametrize('how', ['not installed', 'HF_HUB_DISABLE_XET'])
def test_without_hf_xet_the_http_route_is_used(world, monkeypatch, how):
    if how == 'not installed':  # for this process: hf_xet is not found
        monkeypatch.setitem(sys.modules, 'hf_xet', None)
    else:
        monkeypatch.setenv('HF_HUB_DISABLE_XET', '1')
    path = Path(fetch(find_card(NAME)))
    assert path.read_bytes() == world.data
    assert len(world.downloads(FILE)) == 1
    assert calls(world) == [] and token_requests(world) == [] and \
        world.cas_auth == []
    assert world.logged == []  # the ordinary route: nothing to say
    unchanged(world)


@pytest.mark.skipif(not REAL_HF_XET, reason='hf_xet is not installed')
@pytest.mark.parametrize('cas', ['hang', 'missing'])
def test_the_real_hf_xet_is_bounded_and_falls_back(world, monkeypatch, cas):
    """The real hf_xet, started as the stand-in is, reaches the CAS with
    the Xet token: a CAS that never answers is cut at the limit; one that
    does not know the file makes hf_xet fail, and HTTP brings it."""
    monkeypatch.setenv('PYTHONPATH', os.environ['PYTHONPATH'].replace(
        str(world.standin), str(world.standin / 'none')))
    monkeypatch.setenv('SAPIENS_MM_HUB_TIMEOUT', '4')
    world.cas_mode = cas
    start = time.monotonic()
    if cas == 'hang':
        with pytest.raises(HubTimeoutError,
                           match='did not finish within 4.000'):
            fetch(find_card(NAME))
        assert time.monotonic() - start < BOUND
        assert world.downloads(FILE) == []
        nothing_cached(world)
    else:
        path = Path(fetch(find_card(NAME)))
        assert path.read_bytes() == world.data
        (line, ) = world.logged
        assert 'hf_xet failed' in line and '404' in line, line
    assert calls(world) == []  # the real one ran, not the stand-in
    assert world.cas_auth and set(world.cas_auth) == {
        f'Bearer {world.xet_access_token(REPO)}'}
    assert any(world.xet_hash in r[1] for r in world.requests
               if '/reconstructions/' in r[1])
    unchanged(world)


def test_a_killed_download_leaves_no_xet_process_and_its_folder_goes(
        world, monkeypatch, tmp_path):
    """The process that fetches is killed mid-transfer: its hf_xet child
    ends too (it watches its stdin), and the next download removes the
    dead transfer's folder."""
    env = dict(os.environ, XET_STANDIN_MODE='trickle',
               HF_HUB_DISABLE_PROGRESS_BARS='1',
               PYTHONPATH=os.pathsep.join([os.environ['PYTHONPATH'],
                                           str(ROOT), str(HELPERS)]))
    job = subprocess.Popen(
        [sys.executable, str(HELPERS / 'hub_jobs.py'), 'fetch',
         f'hf://{REPO}/{FILE}'], env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not calls(world):
            assert job.poll() is None, job.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline
            time.sleep(0.05)
        (call, ) = calls(world)
        time.sleep(0.5)  # a few bytes written
    finally:
        job.kill()
        job.wait()
    deadline = time.monotonic() + 10
    while running(call['pid']):
        assert time.monotonic() < deadline, 'the hf_xet child outlived it'
        time.sleep(0.05)
    folder = Path(call['dest']).parent
    assert f'.{job.pid}@' in folder.name and folder.is_dir()
    monkeypatch.setenv('XET_STANDIN_MODE', 'right')
    path = Path(fetch(find_card(NAME)))
    assert path.read_bytes() == world.data
    assert not folder.exists()
    unchanged(world)
