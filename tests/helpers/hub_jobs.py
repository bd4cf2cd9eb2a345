"""Jobs of the shared-cache tests, each run as a process of its own.

    python hub_jobs.py fetch URL
        ``fcntl.flock`` made to do nothing (as on Lustre, GPFS and some NFS
        mounts, where it succeeds for every caller), then
        ``sapiens_mm.zoo.hub.fetch_url(URL)``; prints the path and the
        SHA-256 of the file it got as JSON on the last line.
    python hub_jobs.py watch REPO FILE STOP
        Looks the file up as every Hugging Face tool does
        (``try_to_load_from_cache``) until the file STOP exists, reading it
        whole whenever it is there; prints the SHA-256 of every distinct
        content seen and how many reads there were as JSON.
"""
import hashlib
import json
import os
import sys
import time


def fetch(url: str) -> None:
    import fcntl
    fcntl.flock = lambda fd, operation: None  # locks that do nothing
    from sapiens_mm.zoo.hub import fetch_url
    path = fetch_url(url)
    with open(path, 'rb') as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    print(json.dumps({'path': path, 'sha256': digest}))


def watch(repo_id: str, filename: str, stop: str) -> None:
    from huggingface_hub import try_to_load_from_cache
    seen, reads = set(), 0
    while not os.path.exists(stop):
        path = try_to_load_from_cache(repo_id, filename,
                                      cache_dir=os.environ['HF_HUB_CACHE'])
        if isinstance(path, str):
            with open(path, 'rb') as f:
                seen.add(hashlib.sha256(f.read()).hexdigest())
            reads += 1
        time.sleep(0.005)
    print(json.dumps({'seen': sorted(seen), 'reads': reads}))


if __name__ == '__main__':
    {'fetch': fetch, 'watch': watch}[sys.argv[1]](*sys.argv[2:])
