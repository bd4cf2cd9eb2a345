"""A stand-in for ``hf_xet`` (tests only: a real Xet CAS server cannot run
here), with the public API ``sapiens_mm.zoo.xet_child`` calls:
``XetSession().new_file_download_group(...)`` (a context manager) and its
``start_download_file(XetFileInfo(hash, size), path)``.

Tests copy this file as ``hf_xet.py`` into a folder of their own and put
that folder first on the ``PYTHONPATH`` of the processes they start, so
that the child process of the Xet route imports it instead of the real
``hf_xet`` (this file's own name never shadows the real package).

It gets the file's bytes from the loopback Hub's CAS route
(``GET {endpoint}/v1/reconstructions/{hash}`` with the access token and
the custom headers it was given; tests/helpers/fake_hub.py) and writes
them to the path it was given, calling the progress callback as it goes.
``XET_STANDIN_MODE`` (read when a download runs) makes it misbehave:

- ``right`` (default): the bytes;
- ``wrong``: the bytes with the last one flipped;
- ``short``: all bytes but the last;
- ``oversize``: the bytes, then zeros without end;
- ``trickle``: one byte every 0.2 s, without end (and no progress);
- ``fail``: raises as ``hf_xet`` does when the CAS server refuses;
- ``beside``: the bytes, and 80 MiB more in a file of its own cache
  folder (``HF_XET_CACHE``).

Every download is recorded as a JSON line in the file ``XET_STANDIN_RECORD``
(when set): the arguments, the process id and ``HF_XET_CACHE``. Like
``hf_xet``, it writes a log file into ``HF_XET_CACHE/logs``.
"""
import json
import os
import time
import urllib.request
from types import SimpleNamespace

__all__ = ['XetSession', 'XetFileInfo', 'XetFileDownloadGroup']

MODE_ENV, RECORD_ENV = 'XET_STANDIN_MODE', 'XET_STANDIN_RECORD'


class XetFileInfo:
    """The file to fetch: its Xet hash and size."""

    def __init__(self, hash, file_size=None):  # noqa: A002 (hf_xet's name)
        self.hash, self.file_size = hash, file_size


class XetSession:
    """A session: only makes download groups."""

    def __init__(self, config=None):
        self.config = config

    def new_file_download_group(self, endpoint=None, token=None,
                                token_expiry_unix_secs=None,
                                token_refresh_url=None,
                                token_refresh_headers=None,
                                custom_headers=None, progress_callback=None,
                                progress_interval_ms=100):
        return XetFileDownloadGroup(
            dict(endpoint=endpoint, token=token,
                 token_expiry_unix_secs=token_expiry_unix_secs,
                 token_refresh_url=token_refresh_url,
                 token_refresh_headers=token_refresh_headers,
                 custom_headers=custom_headers), progress_callback)


class XetFileDownloadGroup:
    """Downloads started with :meth:`start_download_file`, run when the
    ``with`` block ends (``hf_xet`` runs them in the background meanwhile)."""

    def __init__(self, options: dict, progress_callback):
        self.options, self.progress_callback = options, progress_callback
        self.files = []

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is None:
            self.wait_to_finish()

    def start_download_file(self, file_info, dest_path):
        self.files.append((file_info, dest_path))

    def wait_to_finish(self):
        for file_info, dest_path in self.files:
            self._download(file_info, dest_path)

    def _progress(self, done: int, total: int) -> None:
        if self.progress_callback is not None:
            report = SimpleNamespace(
                total_bytes=total, total_bytes_completed=done,
                total_bytes_completion_rate=None, total_transfer_bytes=total,
                total_transfer_bytes_completed=done,
                total_transfer_bytes_completion_rate=None)
            self.progress_callback(report, {})

    def _download(self, file_info, dest_path: str) -> None:
        mode = os.environ.get(MODE_ENV, 'right')
        cache = os.environ.get('HF_XET_CACHE')
        if os.environ.get(RECORD_ENV):
            with open(os.environ[RECORD_ENV], 'a') as f:
                f.write(json.dumps(dict(
                    self.options, hash=file_info.hash,
                    size=file_info.file_size, dest=dest_path, mode=mode,
                    pid=os.getpid(), xet_cache=cache)) + '\n')
        if cache:
            os.makedirs(os.path.join(cache, 'logs'), exist_ok=True)
            with open(os.path.join(cache, 'logs', 'xet.log'), 'a') as f:
                f.write(f'download {file_info.hash}\n')
        if mode == 'fail':
            raise RuntimeError('Task error: File reconstruction error: CAS '
                               'Client Error: 403 Forbidden')
        options = self.options
        request = urllib.request.Request(
            f'{options["endpoint"]}/v1/reconstructions/{file_info.hash}',
            headers=dict(options['custom_headers'] or {},
                         Authorization=f'Bearer {options["token"]}'))
        with urllib.request.urlopen(request, timeout=30) as answer:
            data = answer.read()
        if mode == 'wrong':
            data = data[:-1] + bytes([data[-1] ^ 0xFF])
        elif mode == 'short':
            data = data[:-1]
        with open(dest_path, 'wb') as f:
            if mode == 'trickle':
                for i in range(len(data)):  # no progress reported: a
                    f.write(data[i:i + 1])  # stalled reconstruction's
                    f.flush()  # total does not move
                    time.sleep(0.2)
                while True:
                    time.sleep(0.2)
            step = max(1, len(data) // 4)
            for i in range(0, len(data), step):
                f.write(data[i:i + step])
                f.flush()
                self._progress(min(i + step, len(data)), len(data))
            if mode == 'oversize':
                while True:
                    f.write(b'\0' * (64 << 10))
                    f.flush()
                    time.sleep(0.001)
        if mode == 'beside':
            with open(os.path.join(cache, 'staging.bin'), 'wb') as f:
                for _ in range(80):
                    f.write(b'\0' * (1 << 20))
                    f.flush()
                    time.sleep(0.01)
