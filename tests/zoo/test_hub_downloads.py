"""Downloads of registry models through huggingface_hub, against a loopback
stand-in for the Hub (tests/helpers/fake_hub.py): no internet."""
import hashlib
import multiprocessing
import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest
import torch
from fake_hub import FakeHub

from sapiens_mm.checkpoint import (
    load_file,
    save_transformers_checkpoint,
    to_official_layout,
)
from sapiens_mm.models import Sapiens2VisionTransformer
from sapiens_mm.zoo.cards import UnknownModelError, find_card
from sapiens_mm.zoo.hub import (
    CorruptDownloadError,
    GatedModelError,
    ModelFileMissingError,
    NotCachedError,
    cached_file,
    fetch,
    fetch_url,
    resolve_checkpoint,
)


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """A fake Hub as HF_ENDPOINT, a fresh HF_HUB_CACHE, online."""
    with FakeHub() as fake:
        monkeypatch.setenv('HF_ENDPOINT', fake.endpoint)
        monkeypatch.setenv('HF_HUB_CACHE', str(tmp_path / 'hf-cache'))
        for var in ('HF_HUB_OFFLINE', 'TRANSFORMERS_OFFLINE', 'HF_TOKEN'):
            monkeypatch.delenv(var, raising=False)
        yield fake


POSE = 'sapiens_0.3b_goliath_best_goliath_AP_573.pth'


def test_download_once_then_from_the_cache_without_a_request(
        hub, monkeypatch):
    logged = []
    monkeypatch.setattr('sapiens_mm.zoo.hub.print_log',
                        lambda msg, **kw: logged.append(msg))
    data = os.urandom(4096)
    hub.add_file('facebook/sapiens-pose-0.3b', POSE, data)
    hub.add_file('facebook/sapiens-pose-0.3b', 'README.md', b'# card')
    card = find_card('sapiens-pose-0.3b')
    path = fetch(card)
    assert Path(path).read_bytes() == data
    assert Path(path).name == POSE
    assert len(hub.downloads(POSE)) == 1
    assert len(logged) == 1 and 'Licence: CC-BY-NC-4.0' in logged[0]
    seen = len(hub.requests)
    # by name, alias and repository id: the cached file, no request at all
    for name in ('sapiens-pose-0.3b', 'sapiens_0.3b_goliath_best_goliath_'
                 'AP_573', 'facebook/sapiens-pose-0.3b'):
        assert resolve_checkpoint(name) == (path, card)
    assert len(hub.requests) == seen
    assert len(logged) == 1  # the licence is logged once


def test_the_file_is_chosen_by_pattern_over_the_listing(hub):
    # the repository holds another epoch's file than the registry names
    drifted = 'sapiens_0.3b_goliath_best_goliath_mIoU_7700_epoch_200.pth'
    hub.add_file('facebook/sapiens-seg-0.3b', drifted, b'weights')
    hub.add_file('facebook/sapiens-seg-0.3b', 'config.yaml', b'x: 1')
    path = fetch(find_card('sapiens-seg-0.3b'))
    assert Path(path).name == drifted


def test_offline_uses_the_cache_and_explains_what_is_missing(
        hub, monkeypatch):
    hub.add_file('facebook/sapiens-pose-0.3b', POSE, b'pose weights')
    path = fetch(find_card('sapiens-pose-0.3b'))
    monkeypatch.setenv('HF_HUB_OFFLINE', '1')
    seen = len(hub.requests)
    assert fetch(find_card('sapiens-pose-0.3b')) == path
    with pytest.raises(NotCachedError) as e:
        fetch(find_card('sapiens-pose-0.6b'))
    assert len(hub.requests) == seen
    message = str(e.value)
    assert '\n' not in message and 'HF_HUB_OFFLINE' in message
    assert 'tools/download.py sapiens-pose-0.6b' in message


def test_gated_repository_says_how_to_get_access(hub):
    hub.gate('facebook/sapiens2-pose-1b')
    with pytest.raises(GatedModelError) as e:
        fetch(find_card('sapiens2-pose-1b'))
    message = str(e.value)
    assert '\n' not in message
    assert 'facebook/sapiens2-pose-1b is gated' in message
    assert 'HF_TOKEN' in message and 'licence' in message


def test_hf_token_opens_a_gated_repository_and_hf_home_holds_the_cache(
        hub, tmp_path, monkeypatch):
    monkeypatch.delenv('HF_HUB_CACHE')
    monkeypatch.setenv('HF_HOME', str(tmp_path / 'home'))
    hub.add_file('facebook/sapiens2-seg-0.4b', 'sapiens2_0.4b_seg.safetensors',
                 b'seg weights')
    hub.gate('facebook/sapiens2-seg-0.4b', token='hf_test_token')
    with pytest.raises(GatedModelError):
        fetch(find_card('sapiens2-seg-0.4b'))
    monkeypatch.setenv('HF_TOKEN', 'hf_test_token')
    path = Path(fetch(find_card('sapiens2-seg-0.4b')))
    assert path.read_bytes() == b'seg weights'
    assert path.is_relative_to(tmp_path / 'home' / 'hub')


def test_unknown_name_suggests_the_closest(hub):
    with pytest.raises(UnknownModelError) as e:
        resolve_checkpoint('sapiens2-pose-04b')
    assert 'sapiens2-pose-0.4b' in str(e.value)
    # the listing command starts this interpreter by its path, so that it
    # runs as printed whether or not the environment is activated
    for name in ('sapiens2-pose-04b', 'hf://sapiens2-pose-04b'):
        with pytest.raises(UnknownModelError) as e:
            resolve_checkpoint(name)
        found = re.search(r'`(\S+) tools/download\.py --list` lists every '
                          r'model\.$', str(e.value))
        assert found, str(e.value)
        assert os.path.samefile(found.group(1), sys.executable)
    assert hub.requests == []
    with pytest.raises(FileNotFoundError, match='Checkpoint not found'):
        resolve_checkpoint('no/such/file.pth')


def test_missing_file_lists_what_the_repository_has(hub):
    hub.add_file('facebook/sapiens-depth-0.3b', 'README.md', b'# card')
    with pytest.raises(ModelFileMissingError) as e:
        fetch(find_card('sapiens-depth-0.3b'))
    assert 'sapiens_0.3b_render_people_epoch_*.pth' in str(e.value)
    assert 'README.md' in str(e.value)


def test_corrupt_download_is_downloaded_again_then_refused(hub):
    data = b'pose weights' * 100
    hub.add_file('facebook/sapiens-pose-0.3b', POSE, data,
                 listed_sha256=hashlib.sha256(b'other').hexdigest())
    card = find_card('sapiens-pose-0.3b')
    with pytest.raises(CorruptDownloadError, match='SHA-256'):
        fetch(card)
    assert len(hub.downloads(POSE)) == 2
    assert cached_file(card) is None  # nothing bad is left to load


def test_download_cut_halfway_resumes_from_where_it_stopped(hub):
    data = os.urandom(3 << 20)
    name = 'sapiens_0.3b_normal_render_people_epoch_66.pth'
    hub.add_file('facebook/sapiens-normal-0.3b', name, data)
    hub.drop_after('facebook/sapiens-normal-0.3b', name, 2 << 20)
    path = fetch(find_card('sapiens-normal-0.3b'))
    assert hashlib.sha256(Path(path).read_bytes()).digest() == \
        hashlib.sha256(data).digest()
    first, second = hub.downloads(name)
    # every byte that arrived is kept: the range starts where the drop was
    assert (first[2], second[2]) == (None, f'bytes={2 << 20}-')


def test_a_killed_download_starts_again_and_its_leftover_goes(hub):
    """A download whose process was killed is not continued by the next
    process (each keeps its bytes in a file of its own, so that jobs on a
    file system without working locks never write one file together): the
    next one downloads the file whole and removes the leftover of the dead
    process."""
    from huggingface_hub import (
        hf_hub_download,
        scan_cache_dir,
        try_to_load_from_cache,
    )
    repo, name = 'facebook/sapiens-depth-0.3b', \
        'sapiens_0.3b_render_people_epoch_100.pth'
    data = os.urandom(3 << 20)
    hub.add_file(repo, name, data)
    hub.stall_after(repo, name, 2 << 20)  # 2 MiB, then nothing
    card = find_card('sapiens-depth-0.3b')
    cache = Path(os.environ['HF_HUB_CACHE'])
    blobs = cache / 'models--facebook--sapiens-depth-0.3b' / 'blobs'
    # a process of its own (forked: no second import), killed halfway
    child = multiprocessing.get_context('fork').Process(target=fetch,
                                                         args=(card, ))
    child.start()
    try:
        assert hub.stalled.wait(60), 'the download did not start'
        deadline = time.monotonic() + 60
        # most of the 2 MiB sent (the last few KiB may sit in the file's
        # write buffer, how many depends on the HTTP library's chunks)
        while not any(p.stat().st_size >= 1 << 20
                      for p in blobs.glob('*.incomplete')):
            assert time.monotonic() < deadline and child.is_alive()
            time.sleep(0.02)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.join()
    assert child.exitcode == -signal.SIGKILL
    (leftover, ) = blobs.glob('*.incomplete')
    assert f'.{child.pid}@' in leftover.name  # named by its process
    path = fetch(card)  # the next process
    gets = hub.downloads(name)
    assert [range_ for _, _, range_ in gets] == [None, None]
    assert hashlib.sha256(Path(path).read_bytes()).digest() == \
        hashlib.sha256(data).digest()
    assert not list(blobs.glob('*.incomplete'))
    # huggingface_hub's own readers find it in the cache
    assert try_to_load_from_cache(repo, name, cache_dir=cache) == path
    assert hf_hub_download(repo, name, cache_dir=cache,
                           local_files_only=True) == path
    scan = scan_cache_dir(cache)
    assert not scan.warnings
    (cached_repo, ) = scan.repos
    assert cached_repo.repo_id == repo
    assert cached_repo.size_on_disk == len(data)
    (revision, ) = cached_repo.revisions
    assert revision.commit_hash == hub.commits[repo]
    assert revision.refs == frozenset({'main'})
    assert [(f.file_name, f.size_on_disk) for f in revision.files] == [
        (name, len(data))]


def test_hf_url_by_repository_file_and_by_name(hub):
    hub.add_file('someone/finetuned', 'weights/model.pth', b'abc')
    path = fetch_url('hf://someone/finetuned/weights/model.pth')
    assert Path(path).read_bytes() == b'abc'
    hub.add_file('facebook/sapiens-pose-0.3b', POSE, b'pose')
    assert Path(fetch_url('hf://sapiens-pose-0.3b')).read_bytes() == b'pose'
    with pytest.raises(ModelFileMissingError, match='weights/model.pth'):
        fetch_url('hf://someone/finetuned/model.pth')


def test_a_revision_with_only_the_transformers_layout_gives_its_folder(
        hub, tmp_path):
    backbone = Sapiens2VisionTransformer('sapiens2_tiny')
    official = to_official_layout(backbone)
    save_transformers_checkpoint(official, str(tmp_path / 'hf'), (64, 48))
    for name in ('config.json', 'model.safetensors'):
        hub.add_file('facebook/sapiens2-pretrain-0.4b', name,
                     (tmp_path / 'hf' / name).read_bytes())
    path, card = resolve_checkpoint('sapiens2-pretrain-0.4b@refs/pr/1')
    assert card.name == 'sapiens2-pretrain-0.4b'
    assert sorted(os.listdir(path)) == ['config.json', 'model.safetensors']
    assert any(r[1].startswith('/facebook/sapiens2-pretrain-0.4b/resolve/'
                               'refs/pr/1/') for r in hub.requests)
    state = load_file(path)  # read back in the official layout
    assert sorted(state) == sorted(k for k in official
                                   if not k.endswith('periods'))
    assert all(torch.equal(state[k], official[k]) for k in state)


def test_hf_scheme_in_a_runner_load_from(hub, tmp_path):
    import io

    from hf_load_worker import Linear
    from mmengine.runner import Runner
    src = Linear()
    buffer = io.BytesIO()
    torch.save({'state_dict': src.state_dict()}, buffer)
    hub.add_file('someone/linear', 'epoch_1.pth', buffer.getvalue())
    runner = Runner(model=Linear(), work_dir=str(tmp_path / 'work'),
                    load_from='hf://someone/linear/epoch_1.pth')
    runner.load_or_resume()
    assert torch.equal(runner.model.fc.weight, src.fc.weight)
    assert len(hub.downloads('epoch_1.pth')) == 1
