"""A hostile Hub mirror (``HF_ENDPOINT``) played by the loopback stand-in
(tests/helpers/fake_hub.py), as an attacker would: path names in its
headers and listings, an answer that changes between requests, a body far
longer than announced, answers that never end. Each attack must leave every
file outside the repository's cache folder as it was, leave nothing partial
behind, and end in one line within the time limit; through the command
lines too (one line on stderr, exit code 1)."""
import os
import subprocess
import sys
import time
from pathlib import Path

import cv2
import numpy as np
import pytest
from fake_hub import FakeHub, tree

from sapiens_mm.zoo.cards import find_card
from sapiens_mm.zoo.hub import (
    CorruptDownloadError,
    HubAnswerError,
    HubError,
    HubTimeoutError,
    fetch,
    fetch_url,
)

ROOT = Path(__file__).resolve().parents[2]
NAME, REPO, FILE = 'sapiens2-pose-0.4b', 'facebook/sapiens2-pose-0.4b', \
    'sapiens2_0.4b_pose.safetensors'
REPO_DIR = 'models--facebook--sapiens2-pose-0.4b'
#: The limits of these tests (seconds): short, so that a hang shows.
TIMEOUT = 1.5
#: How long an attack may take at most: the limit, one read past it, and a
#: loaded 2-core machine.
BOUND = 15.0
#: Where the attacks aim, relative to the cache's blobs/ and snapshots/
#: folders (the probe's values).
ETAG = '../../../../x/victim'
COMMIT = '../../x/DIR'


@pytest.fixture
def world(tmp_path, monkeypatch):
    """A loopback Hub as HF_ENDPOINT; the cache deep in a tree of
    sentinel files, among them the files the attacks aim at; short
    limits."""
    root = tmp_path / 'root'
    cache = root / 'home' / 'hf' / 'hub'
    blobs = cache / REPO_DIR / 'blobs'
    victim = Path(os.path.normpath(blobs / ETAG))
    pointed = Path(os.path.normpath(cache / REPO_DIR / 'snapshots' / COMMIT
                                    / FILE))
    for path, data in ((victim, b'victim'), (pointed, b'user file'),
                       (root / 'home' / '.bashrc', b'# shell'),
                       (cache / 'models--other--repo' / 'blobs' / ('a' * 64),
                        b'another model')):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    with FakeHub() as hub:
        monkeypatch.setenv('HF_ENDPOINT', hub.endpoint)
        monkeypatch.setenv('HF_HUB_CACHE', str(cache))
        monkeypatch.setenv('SAPIENS_MM_HUB_TIMEOUT', str(TIMEOUT))
        monkeypatch.setenv('SAPIENS_MM_HUB_MIN_SPEED', str(1 << 30))
        for var in ('HF_HUB_OFFLINE', 'TRANSFORMERS_OFFLINE', 'HF_TOKEN'):
            monkeypatch.delenv(var, raising=False)
        hub.add_file(REPO, FILE, os.urandom(2000))
        hub.root, hub.cache = root, cache
        hub.victim, hub.pointed = victim, pointed
        hub.before = tree(root, cache / REPO_DIR)
        yield hub


def unchanged(hub) -> None:
    """Nothing outside the repository's cache folder changed, nothing
    partial is left anywhere."""
    assert tree(hub.root, hub.cache / REPO_DIR) == hub.before
    assert hub.victim.read_bytes() == b'victim'
    assert hub.pointed.read_bytes() == b'user file'
    assert not [p for p in hub.root.rglob('*')
                if p.name.endswith(('.incomplete', '.link', '.tmp'))]


ATTACKS = {
    # ETag naming a path outside the cache (blobs/<ETag>)
    'etag': (lambda hub: hub.override(REPO, FILE, ETag=f'"{ETAG}"'),
             HubAnswerError, 'the ETag'),
    # commit id naming a folder outside the repository (snapshots/<commit>)
    'commit': (lambda hub: hub.override(REPO, FILE, X_Repo_Commit=COMMIT),
               HubAnswerError, 'commit id'),
    # the size the announced bytes are checked against
    'size': (lambda hub: hub.override(REPO, FILE, X_Linked_Size='-20'),
             HubAnswerError, 'no size'),
    # a listed file name with ..
    'listed name': (lambda hub: hub.add_file(REPO, f'../../x/DIR/{FILE}',
                                             b'evil'),
                    HubAnswerError, 'listed file name'),
    # honest first answer, then other names and other bytes (time of check
    # to time of use): only the first answer's names are used, and the
    # bytes must match them
    'changed answer': (lambda hub: (
        hub.override(REPO, FILE, after=1, ETag=f'"{ETAG}"',
                     X_Repo_Commit=COMMIT), hub.corrupt(REPO, FILE, 0, 1)),
        CorruptDownloadError, 'SHA-256'),
    # a chunked body without end for 2000 announced bytes
    'oversize': (lambda hub: hub.oversize(REPO, FILE),
                 HubAnswerError, 'more bytes than the 2000'),
    # a listing that never answers
    'silent listing': (lambda hub: hub.hang_listing(REPO),
                       HubTimeoutError, 'did not finish within 1.5 s'),
    # a listing whose status line comes one byte at a time
    'trickled listing': (lambda hub: hub.hang_listing(REPO, trickle=0.2),
                         HubTimeoutError, 'did not finish within 1.5 s'),
    # the file one byte at a time
    'trickled file': (lambda hub: hub.trickle(REPO, FILE, 0.2),
                      HubTimeoutError, 'did not finish within 1.5 s'),
    # the file's first bytes, then silence
    'silent file': (lambda hub: hub.stall_after(REPO, FILE, 100),
                    HubTimeoutError, 'did not finish within 1.5 s'),
}


@pytest.mark.parametrize('attack', list(ATTACKS))
def test_a_hostile_server_changes_nothing_outside_the_repository_folder(
        world, attack):
    arrange, error, text = ATTACKS[attack]
    arrange(world)
    start = time.monotonic()
    with pytest.raises(error) as e:
        fetch(find_card(NAME))
    assert time.monotonic() - start < BOUND
    message = str(e.value)
    assert '\n' not in message and text in message, message
    unchanged(world)
    if attack == 'oversize':  # cut as soon as it passed the announced size
        assert world.oversize_sent < 64 << 20


def test_a_missing_file_with_a_hostile_commit_id_writes_nothing(world):
    # huggingface_hub itself records a missing file as
    # .no_exist/<X-Repo-Commit>/<file>
    world.commits[REPO] = COMMIT
    with pytest.raises(HubError, match='has no file nothing.pth'):
        fetch_url(f'hf://{REPO}/nothing.pth')
    unchanged(world)


def test_names_changed_after_the_first_answer_are_not_used(world):
    world.override(REPO, FILE, after=1, ETag=f'"{ETAG}"',
                   X_Repo_Commit=COMMIT)
    path = Path(fetch(find_card(NAME)))
    assert path.read_bytes() == world.repos[REPO][FILE]
    commit = world.commits[REPO]
    assert path == world.cache / REPO_DIR / 'snapshots' / commit / FILE
    unchanged(world)


def cli(world, tmp_path, *args):
    """Run a command line with the test's environment (the Hub, the cache,
    the limits; no progress bar, so that stderr holds only the error)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in [os.environ.get('PYTHONPATH')] if p]),
               HF_HUB_DISABLE_PROGRESS_BARS='1')
    start = time.monotonic()
    proc = subprocess.run([sys.executable, *args], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    return proc, time.monotonic() - start


@pytest.mark.parametrize('attack', ['etag', 'trickled file'])
def test_download_tool_refuses_a_hostile_server_in_one_line(
        world, tmp_path, attack):
    ATTACKS[attack][0](world)
    proc, _ = cli(world, tmp_path, str(ROOT / 'tools' / 'download.py'),
                  NAME)
    assert proc.returncode == 1
    (line, ) = proc.stderr.splitlines()
    assert line.startswith('tools/download.py: error: ') and \
        ATTACKS[attack][2] in line, proc.stderr
    unchanged(world)


def test_inference_command_refuses_a_hostile_server_in_one_line(
        world, tmp_path):
    ATTACKS['commit'][0](world)
    image = tmp_path / 'person.png'
    cv2.imwrite(str(image), np.full((64, 48, 3), 128, np.uint8))
    proc, _ = cli(world, tmp_path, '-m', 'sapiens_mm', str(image), '--pose',
                  NAME, '--detector', 'none', '--out-dir',
                  str(tmp_path / 'out'), '--device', 'cpu')
    assert proc.returncode == 1
    (line, ) = proc.stderr.splitlines()
    assert line.startswith('python -m sapiens_mm: error: ') and \
        "the commit id (X-Repo-Commit) '../../x/DIR'" in line, proc.stderr
    unchanged(world)
