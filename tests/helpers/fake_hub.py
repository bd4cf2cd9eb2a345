"""A loopback stand-in for the Hugging Face Hub, for tests without internet.

:class:`FakeHub` serves, on ``127.0.0.1``, the few endpoints
``huggingface_hub`` uses to download a file:

- ``HEAD`` / ``GET /{org}/{repo}/resolve/{revision}/{path}``: the file, with
  ``X-Repo-Commit``, ``ETag`` (the SHA-256 of the content, as for LFS files),
  ``Content-Length`` and ``Range`` support (``206`` + ``Content-Range``);
- ``GET /api/models/{org}/{repo}[/revision/{revision}]``: the listing
  (``siblings`` with ``rfilename``, ``size`` and ``lfs.sha256``);
- a gated repository answers ``401`` with ``X-Error-Code: GatedRepo``; an
  unknown one ``404`` with ``RepoNotFound``, a missing file ``404`` with
  ``EntryNotFound``.

Every request is recorded (:attr:`FakeHub.requests`). Faults can be
injected: :meth:`FakeHub.drop_after` sends only the first bytes of a file on
its next download and then drops the connection (a download cut halfway);
:meth:`FakeHub.stall_after` sends the first bytes and then stalls, the
connection open, until the hub closes (a client killed mid-download);
:meth:`FakeHub.add_file` with ``listed_sha256`` lists a hash the content
does not have (a corrupt download).
"""
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List, Optional, Tuple
from urllib.parse import unquote, urlsplit

__all__ = ['FakeHub']


class FakeHub:
    """A Hub stand-in on ``127.0.0.1`` (start with ``with FakeHub() as
    hub:``; ``hub.endpoint`` is its URL)."""

    def __init__(self):
        self.repos: Dict[str, Dict[str, bytes]] = {}
        self.listed: Dict[Tuple[str, str], str] = {}
        self.gated: set = set()
        self.tokens: Dict[str, Optional[str]] = {}
        self.commits: Dict[str, str] = {}
        self.requests: List[Tuple[str, str, Optional[str]]] = []
        self._drops: Dict[Tuple[str, str], int] = {}
        self._stalls: Dict[Tuple[str, str], int] = {}
        #: Set once a stalled download has sent its bytes.
        self.stalled = threading.Event()
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._server: Optional[ThreadingHTTPServer] = None

    # set-up
    def add_file(self, repo_id: str, path: str, data: bytes,
                 listed_sha256: Optional[str] = None) -> None:
        """Serve ``data`` as ``repo_id/path``; the listing shows
        ``listed_sha256`` (default: the real hash)."""
        self.repos.setdefault(repo_id, {})[path] = data
        self.commits.setdefault(
            repo_id, hashlib.sha1(repo_id.encode()).hexdigest())
        if listed_sha256 is not None:
            self.listed[(repo_id, path)] = listed_sha256

    def gate(self, repo_id: str, token: Optional[str] = None) -> None:
        """Make ``repo_id`` gated: requests answer 401 GatedRepo unless
        they carry ``token`` (``Authorization: Bearer <token>``)."""
        self.gated.add(repo_id)
        self.tokens[repo_id] = token
        self.commits.setdefault(repo_id,
                                hashlib.sha1(repo_id.encode()).hexdigest())

    def drop_after(self, repo_id: str, path: str, nbytes: int) -> None:
        """The next GET of the file sends ``nbytes`` bytes, then drops the
        connection."""
        self._drops[(repo_id, path)] = nbytes

    def stall_after(self, repo_id: str, path: str, nbytes: int) -> None:
        """The next GET of the file sends ``nbytes`` bytes, sets
        :attr:`stalled`, then sends nothing more until the hub closes."""
        self._stalls[(repo_id, path)] = nbytes

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f'http://{host}:{port}'

    def downloads(self, path: str) -> List[Tuple[str, str, Optional[str]]]:
        """The GET requests of file ``path`` (any repository)."""
        return [r for r in self.requests
                if r[0] == 'GET' and r[1].endswith('/' + path)]

    # server
    def __enter__(self) -> 'FakeHub':
        hub = self

        class Handler(BaseHTTPRequestHandler):

            def log_message(self, *args):  # quiet
                pass

            def do_HEAD(self):
                hub._serve(self, head=True)

            def do_GET(self):
                hub._serve(self, head=False)

        self._server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, args=(0.05, ),
                         daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()

    def _error(self, h, status: int, code: str, message: str,
               repo_id: Optional[str] = None) -> None:
        body = json.dumps({'error': message}).encode()
        h.send_response(status)
        h.send_header('X-Error-Code', code)
        h.send_header('X-Error-Message', message)
        if repo_id in self.commits:
            h.send_header('X-Repo-Commit', self.commits[repo_id])
        h.send_header('Content-Type', 'application/json')
        h.send_header('Content-Length', str(len(body)))
        h.end_headers()
        if h.command != 'HEAD':
            h.wfile.write(body)

    def _serve(self, h, head: bool) -> None:
        path = unquote(urlsplit(h.path).path)
        with self._lock:
            self.requests.append((h.command, path, h.headers.get('Range')))
        api = re.fullmatch(r'/api/models/([^/]+/[^/]+)(/revision/.+)?', path)
        if api:
            return self._listing(h, api.group(1))
        # the revision is URL-quoted (refs%2Fpr%2F1): match before unquoting
        m = re.fullmatch(r'/([^/]+/[^/]+)/resolve/([^/]+)/(.+)',
                         urlsplit(h.path).path)
        if m is None:
            return self._error(h, 404, 'RepoNotFound', 'Not found')
        repo_id, _, name = (unquote(g) for g in m.groups())
        if self._refused(h, repo_id):
            return self._error(
                h, 401, 'GatedRepo',
                f'Access to model {repo_id} is restricted. You must have '
                'access to it and be authenticated to access it.', repo_id)
        if repo_id not in self.repos:
            return self._error(h, 404, 'RepoNotFound',
                               'Repository not found')
        if name not in self.repos[repo_id]:
            return self._error(h, 404, 'EntryNotFound',
                               f'{name} does not exist', repo_id)
        data = self.repos[repo_id][name]
        start = 0
        rng = re.fullmatch(r'bytes=(\d+)-', h.headers.get('Range') or '')
        if rng and not head:
            start = int(rng.group(1))
        h.send_response(206 if start else 200)
        h.send_header('X-Repo-Commit', self.commits[repo_id])
        h.send_header('ETag', f'"{hashlib.sha256(data).hexdigest()}"')
        h.send_header('Accept-Ranges', 'bytes')
        h.send_header('Content-Length', str(len(data) - start))
        if start:
            h.send_header('Content-Range',
                          f'bytes {start}-{len(data) - 1}/{len(data)}')
        h.end_headers()
        if head:
            return
        stall = self._stalls.pop((repo_id, name), None)
        if stall is not None:
            h.wfile.write(data[start:start + stall])
            h.wfile.flush()
            self.stalled.set()
            self._closing.wait()
            h.close_connection = True
            return
        drop = self._drops.pop((repo_id, name), None)
        if drop is not None:
            h.wfile.write(data[start:start + drop])
            h.wfile.flush()
            h.close_connection = True
            return
        h.wfile.write(data[start:])

    def _refused(self, h, repo_id: str) -> bool:
        token = self.tokens.get(repo_id)
        return repo_id in self.gated and (
            token is None
            or h.headers.get('Authorization') != f'Bearer {token}')

    def _listing(self, h, repo_id: str) -> None:
        if self._refused(h, repo_id):
            return self._error(h, 401, 'GatedRepo',
                               f'Access to model {repo_id} is restricted.',
                               repo_id)
        if repo_id not in self.repos:
            return self._error(h, 404, 'RepoNotFound',
                               'Repository not found')
        siblings = []
        for name, data in sorted(self.repos[repo_id].items()):
            sha = self.listed.get((repo_id, name),
                                  hashlib.sha256(data).hexdigest())
            siblings.append({
                'rfilename': name,
                'size': len(data),
                'blobId': hashlib.sha1(data).hexdigest(),
                'lfs': {'size': len(data), 'sha256': sha, 'pointerSize': 134}
            })
        body = json.dumps({'id': repo_id, 'modelId': repo_id,
                           'sha': self.commits[repo_id], 'private': False,
                           'siblings': siblings}).encode()
        h.send_response(200)
        h.send_header('Content-Type', 'application/json')
        h.send_header('Content-Length', str(len(body)))
        h.end_headers()
        if h.command != 'HEAD':
            h.wfile.write(body)
