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
does not have (a corrupt download); :meth:`FakeHub.corrupt` flips a byte of
one download; :meth:`FakeHub.hold_downloads` and :meth:`FakeHub.throttle`
make downloads overlap (jobs sharing one cache).

A hostile server (a mirror set as ``HF_ENDPOINT``) is played by
:meth:`FakeHub.override` (any header of a file's answers, e.g. an ``ETag``
of ``../../../../x/victim`` or an ``X-Repo-Commit`` of ``../../x/DIR``,
from its n-th request on: a server that answers a second request
differently), :meth:`FakeHub.oversize` (a chunked body far longer than the
size the server announced), :meth:`FakeHub.trickle` (one byte every few
seconds) and :meth:`FakeHub.hang_listing` (a listing that never answers, or
whose status line trickles).

Xet-backed files (:meth:`FakeHub.xet`): their answers carry ``X-Xet-Hash``
and the ``Link: <...xet-read-token/<commit>>; rel="xet-auth"`` of the Hub;
``GET /api/models/{org}/{repo}/xet-read-token/{revision}`` answers the
CAS address (the hub itself), an access token and its expiration, in
``X-Xet-*`` headers and as JSON, as the Hub does (:attr:`FakeHub.xet_token`
replaces any of those headers, or the status); the hub is also the CAS
server: ``GET /v1/reconstructions/{xet hash}`` with the access token
answers the file's bytes (the protocol of the test stand-in for
``hf_xet``, tests/helpers/xet_standin.py; the real ``hf_xet`` asks
``/v2/...`` first and expects JSON), ``404`` for an unknown hash;
:attr:`FakeHub.cas_mode` ``'missing'`` answers ``404`` to everything,
``'hang'`` never answers.

:func:`tree` lists a folder's files (to show that nothing outside the
repository's cache folder changed).
"""
import hashlib
import json
import re
import threading
import time
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
        self._overrides: Dict[Tuple[str, str], Tuple[int, dict]] = {}
        self._answered: Dict[Tuple[str, str], int] = {}
        self._oversize: Dict[Tuple[str, str], Optional[int]] = {}
        self._trickles: Dict[Tuple[str, str], float] = {}
        self._corrupt: Dict[Tuple[str, str], set] = {}
        self._gets: Dict[Tuple[str, str], int] = {}
        self._hung_listings: Dict[str, Optional[float]] = {}
        self._throttle: Optional[Tuple[int, float]] = None
        self._xet: Dict[Tuple[str, str], str] = {}
        #: Headers replacing those of the Xet token answers; ``'status'``:
        #: an error status instead; ``'hang'``: no answer at all.
        self.xet_token: Dict[str, object] = {}
        #: ``'serve'``, ``'missing'`` or ``'hang'`` (see the module).
        self.cas_mode = 'serve'
        #: The ``Authorization`` header of every CAS request.
        self.cas_auth: List[Optional[str]] = []
        self._hold = 0
        self._in_flight = 0
        self._cond = threading.Condition()
        #: Bytes of the body sent by the last :meth:`oversize` answer.
        self.oversize_sent = 0
        #: The most downloads that were in flight at once.
        self.max_in_flight = 0
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

    def xet(self, repo_id: str, path: str) -> str:
        """Serve the file as a Xet-backed one (see the module); returns its
        Xet hash (here: the SHA-256 of ``b'xet:' + content``, 64 hex
        digits like the real Merkle hash)."""
        data = self.repos[repo_id][path]
        self._xet[(repo_id, path)] = hashlib.sha256(b'xet:' +
                                                    data).hexdigest()
        return self._xet[(repo_id, path)]

    def xet_access_token(self, repo_id: str) -> str:
        """The CAS access token the token route gives for ``repo_id``."""
        return 'xet-' + hashlib.sha1(repo_id.encode()).hexdigest()[:16]

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

    def override(self, repo_id: str, path: str, after: int = 0,
                 **headers: str) -> None:
        """Answer every HEAD / GET of the file from its ``after``-th request
        on (counted from 0) with these header values (``_`` in a name is
        ``-``: ``X_Repo_Commit='../../x/DIR'``, ``ETag='"../x"'``)."""
        self._overrides[(repo_id, path)] = (
            after, {k.replace('_', '-'): v for k, v in headers.items()})

    def oversize(self, repo_id: str, path: str,
                 extra: Optional[int] = None) -> None:
        """Downloads of the file send a chunked body: the content, then
        ``extra`` more bytes (None: without end, until the client closes);
        the listing and HEAD announce the content's size."""
        self._oversize[(repo_id, path)] = extra

    def trickle(self, repo_id: str, path: str, interval: float) -> None:
        """Downloads of the file send their headers, then one byte every
        ``interval`` seconds."""
        self._trickles[(repo_id, path)] = interval

    def hang_listing(self, repo_id: str,
                     trickle: Optional[float] = None) -> None:
        """The listing of ``repo_id`` never answers (``trickle``: its status
        line comes one byte every ``trickle`` seconds, without end)."""
        self._hung_listings[repo_id] = trickle

    def corrupt(self, repo_id: str, path: str, *nth: int) -> None:
        """The ``nth`` downloads (GET, counted from 0) of the file get one
        byte flipped (same length)."""
        self._corrupt[(repo_id, path)] = set(nth)

    def hold_downloads(self, n: int) -> None:
        """Every download waits (up to 60 s) until ``n`` downloads are in
        flight at once before it sends its body."""
        self._hold = n

    def throttle(self, piece: int, delay: float) -> None:
        """Send file bodies ``piece`` bytes at a time, ``delay`` seconds
        apart."""
        self._throttle = (piece, delay)

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
        token = re.fullmatch(r'/api/models/([^/]+/[^/]+)/xet-read-token/.+',
                             path)
        if token:
            return self._xet_token(h, token.group(1))
        cas = re.fullmatch(r'/v([12])/reconstructions/([0-9a-f]{64})', path)
        if cas:
            return self._cas(h, cas.group(1), cas.group(2))
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
        key = (repo_id, name)
        with self._lock:
            answered = self._answered.get(key, 0)
            self._answered[key] = answered + 1
            nth_get = self._gets.get(key, 0)
            if not head:
                self._gets[key] = nth_get + 1
        start = 0
        rng = re.fullmatch(r'bytes=(\d+)-', h.headers.get('Range') or '')
        if rng and not head:
            start = int(rng.group(1))
        headers = {
            'X-Repo-Commit': self.commits[repo_id],
            'ETag': f'"{hashlib.sha256(data).hexdigest()}"',
            'Accept-Ranges': 'bytes',
            'Content-Length': str(len(data) - start),
        }
        if start:
            headers['Content-Range'] = \
                f'bytes {start}-{len(data) - 1}/{len(data)}'
        if key in self._xet:
            headers['X-Xet-Hash'] = self._xet[key]
            headers['Link'] = (
                f'<{self.endpoint}/api/models/{repo_id}/xet-read-token/'
                f'{self.commits[repo_id]}>; rel="xet-auth"')
        after, override = self._overrides.get(key, (0, {}))
        if answered >= after:
            headers.update(override)
        oversize = key in self._oversize and not head
        if oversize:
            h.protocol_version = 'HTTP/1.1'
            del headers['Content-Length']
            headers['Transfer-Encoding'] = 'chunked'
        h.send_response(206 if start else 200)
        for k, v in headers.items():
            h.send_header(k, v)
        h.end_headers()
        if head:
            return
        if nth_get in self._corrupt.get(key, ()):
            data = data[:-1] + bytes([data[-1] ^ 0xFF])
        self._wait_for_company()
        try:
            if oversize:
                return self._send_oversize(h, data, self._oversize[key])
            if key in self._trickles:
                return self._drip(h, data[start:], self._trickles[key])
            stall = self._stalls.pop(key, None)
            if stall is not None:
                h.wfile.write(data[start:start + stall])
                h.wfile.flush()
                self.stalled.set()
                self._closing.wait()
                h.close_connection = True
                return
            drop = self._drops.pop(key, None)
            if drop is not None:
                h.wfile.write(data[start:start + drop])
                h.wfile.flush()
                h.close_connection = True
                return
            self._send_body(h, data[start:])
        finally:
            with self._cond:
                self._in_flight -= 1

    def _wait_for_company(self) -> None:
        with self._cond:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._in_flight >= self._hold,
                                timeout=60)

    def _send_body(self, h, body: bytes) -> None:
        if self._throttle is None:
            h.wfile.write(body)
            return
        piece, delay = self._throttle
        for i in range(0, len(body), piece):
            h.wfile.write(body[i:i + piece])
            h.wfile.flush()
            time.sleep(delay)

    def _send_oversize(self, h, data: bytes, extra: Optional[int]) -> None:
        h.close_connection = True
        self.oversize_sent = 0
        filler = b'\0' * (64 << 10)
        try:
            h.wfile.write(b'%x\r\n%s\r\n' % (len(data), data))
            self.oversize_sent = len(data)
            while (extra is None or self.oversize_sent - len(data) < extra) \
                    and not self._closing.is_set():
                n = len(filler) if extra is None else min(
                    len(filler), extra - (self.oversize_sent - len(data)))
                h.wfile.write(b'%x\r\n%s\r\n' % (n, filler[:n]))
                self.oversize_sent += n
            h.wfile.write(b'0\r\n\r\n')
        except OSError:  # the client closed the connection
            pass

    def _drip(self, h, body: bytes, interval: float) -> None:
        h.close_connection = True
        try:
            for i in range(len(body)):
                h.wfile.write(body[i:i + 1])
                h.wfile.flush()
                if self._closing.wait(interval):
                    return
        except OSError:  # the client closed the connection
            pass

    def _repo_refused(self, h, repo_id: str) -> bool:
        """Answer 401 for a gated repository without the token, 404 for an
        unknown one; whether it did."""
        if self._refused(h, repo_id):
            self._error(h, 401, 'GatedRepo',
                        f'Access to model {repo_id} is restricted.', repo_id)
        elif repo_id not in self.repos:
            self._error(h, 404, 'RepoNotFound', 'Repository not found')
        else:
            return False
        return True

    def _xet_token(self, h, repo_id: str) -> None:
        if self._repo_refused(h, repo_id):
            return
        answer = {'X-Xet-Cas-Url': self.endpoint,
                  'X-Xet-Access-Token': self.xet_access_token(repo_id),
                  'X-Xet-Token-Expiration': str(int(time.time()) + 3600)}
        answer.update(self.xet_token)
        status = int(answer.pop('status', 200))
        if status >= 400:
            return self._error(h, status, 'XetTokenError', 'no token')
        if answer.pop('hang', None):
            self._closing.wait()
            h.close_connection = True
            return
        body = json.dumps({'casUrl': answer.get('X-Xet-Cas-Url'),
                           'accessToken': answer.get('X-Xet-Access-Token'),
                           'exp': int(answer['X-Xet-Token-Expiration'])
                           if str(answer.get('X-Xet-Token-Expiration',
                                             '')).isdigit() else None
                           }).encode()
        h.send_response(status)
        for k, v in answer.items():
            h.send_header(k, str(v))
        h.send_header('Content-Type', 'application/json')
        h.send_header('Content-Length', str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    def _cas(self, h, version: str, xet_hash: str) -> None:
        auth = h.headers.get('Authorization')
        with self._lock:
            self.cas_auth.append(auth)
        if self.cas_mode == 'hang':
            self._closing.wait()
            h.close_connection = True
            return
        found = [(repo_id, path) for (repo_id, path), x in self._xet.items()
                 if x == xet_hash]
        if self.cas_mode == 'missing' or version != '1' or not found:
            return self._error(h, 404, 'NotFound', 'no such file')
        repo_id, path = found[0]
        if auth != f'Bearer {self.xet_access_token(repo_id)}':
            return self._error(h, 401, 'Unauthorized', 'bad CAS token')
        data = self.repos[repo_id][path]
        h.send_response(200)
        h.send_header('Content-Type', 'application/octet-stream')
        h.send_header('Content-Length', str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _refused(self, h, repo_id: str) -> bool:
        token = self.tokens.get(repo_id)
        return repo_id in self.gated and (
            token is None
            or h.headers.get('Authorization') != f'Bearer {token}')

    def _listing(self, h, repo_id: str) -> None:
        if repo_id in self._hung_listings:
            interval = self._hung_listings[repo_id]
            if interval is None:
                self._closing.wait()
            else:
                self._drip(h, b'HTTP/1.1 200 OK\r\n' * 10000, interval)
            h.close_connection = True
            return
        if self._repo_refused(h, repo_id):
            return
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
