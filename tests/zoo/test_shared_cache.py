"""Jobs that share one Hugging Face cache on a file system whose locks do
nothing (``fcntl.flock`` patched away in each job, as Lustre, GPFS and some
NFS mounts behave): two processes download the same file from the loopback
Hub at the same time, one of them receiving a corrupt copy first, while a
third reads the cache as every Hugging Face tool does. Both end with the
checked file, the reader never sees a partial or corrupt one, and nothing is
left behind."""
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from fake_hub import FakeHub

ROOT = Path(__file__).resolve().parents[2]
HELPERS = ROOT / 'tests' / 'helpers'
REPO, FILE = 'someone/big-model', 'weights/model.pth'


def test_two_jobs_download_one_file_into_a_cache_without_locks(tmp_path):
    cache = tmp_path / 'shared' / 'hub'
    data = os.urandom(4 << 20)
    expected = hashlib.sha256(data).hexdigest()
    stop = tmp_path / 'stop'
    with FakeHub() as hub:
        hub.add_file(REPO, FILE, data)
        hub.hold_downloads(2)  # the bodies start once both jobs are in
        hub.throttle(256 << 10, 0.05)  # about a second per download
        hub.corrupt(REPO, FILE, 1)  # the second download: a byte flipped
        env = dict(os.environ, HF_ENDPOINT=hub.endpoint,
                   HF_HUB_CACHE=str(cache), HF_HUB_DISABLE_PROGRESS_BARS='1',
                   PYTHONPATH=os.pathsep.join([str(ROOT), str(HELPERS)]))
        env.pop('HF_HUB_OFFLINE', None)
        job = [sys.executable, str(HELPERS / 'hub_jobs.py')]
        reader = subprocess.Popen(job + ['watch', REPO, FILE, str(stop)],
                                  env=env, stdout=subprocess.PIPE, text=True)
        fetchers = [subprocess.Popen(job + ['fetch', f'hf://{REPO}/{FILE}'],
                                     env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
                    for _ in range(2)]
        try:
            outs = [p.communicate(timeout=300)[0] for p in fetchers]
        finally:
            stop.touch()
            for p in fetchers:
                p.kill()
            watched = json.loads(reader.communicate(timeout=60)[0])
        assert hub.max_in_flight >= 2  # the lock kept neither job waiting
    for p, out in zip(fetchers, outs):
        assert p.returncode == 0, out
    results = [json.loads(out.splitlines()[-1]) for out in outs]
    assert [r['sha256'] for r in results] == [expected] * 2
    assert results[0]['path'] == results[1]['path']
    # the job that got the corrupt copy discarded it and said so
    assert sum('the download is corrupt' in out for out in outs) == 1
    # the reader saw the file (and only the whole, checked file)
    assert watched['reads'] > 0 and watched['seen'] == [expected]
    blobs = cache / 'models--someone--big-model' / 'blobs'
    assert sorted(p.name for p in blobs.iterdir()) == [expected,
                                                      f'{expected}.lock']
    from huggingface_hub import scan_cache_dir
    assert not scan_cache_dir(cache).warnings
