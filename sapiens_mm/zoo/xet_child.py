"""The child process of the Xet route of :mod:`sapiens_mm.zoo.hub`.

``hf_xet`` reconstructs a file of a Xet-backed repository from a CAS server
in Rust threads that no Python time limit reaches, from a storage address
and a reconstruction the server chooses. :mod:`sapiens_mm.zoo.hub` runs
each such transfer in this process, the unit it can kill: it runs this file
as a script (only the standard library and ``hf_xet`` are imported, nothing
of sapiens_mm), sends one request, watches the file written and the time,
and kills the process when either passes its limit.

The request is one JSON line on stdin (through a pipe, so that the tokens
in it appear in no command line or environment):

- ``cas_url``, ``token``, ``token_expiry``: the CAS server and its access
  token (checked by the parent);
- ``token_refresh_url``, ``token_refresh_headers``: where ``hf_xet`` asks
  for a new access token on a long transfer (the Hub endpoint's own route,
  with the user's ``HF_TOKEN``);
- ``headers``: sent with every CAS request (no ``Authorization``);
- ``hash``, ``size``: the file's Xet hash and size;
- ``dest``: the file to write, a path the parent chose;
- ``seconds``: the process ends itself after this long (the parent kills
  it first; this covers a parent that stopped without dying).

The answers are JSON lines on the process's original stdout (its file
descriptor 1 is pointed at stderr, so that nothing else writes there):
``{"bytes": n}`` as the file is written, then ``{"done": true}``,
``{"error": "<one line>"}`` (``hf_xet`` failed) or ``{"unavailable":
"<one line>"}`` (``hf_xet`` does not import). The process exits at once
when its stdin ends: the parent died.
"""
import json
import os
import sys
import threading

#: Exit codes when the process ends itself.
PARENT_GONE, OUT_OF_TIME = 3, 4


def _one_line(error: BaseException) -> str:
    text = ' '.join(f'{type(error).__name__}: {error}'.split())
    return text if len(text) <= 500 else text[:497] + '...'


def main() -> int:
    """Run the request read from stdin; the exit code is 0 when answered
    ``done`` or ``unavailable``."""
    answers = os.fdopen(os.dup(1), 'w', encoding='utf-8')
    os.dup2(2, 1)  # whatever else writes to stdout goes to stderr
    lock = threading.Lock()

    def answer(**message) -> None:
        with lock:
            answers.write(json.dumps(message) + '\n')
            answers.flush()

    request = json.loads(sys.stdin.readline())

    def parent_gone() -> None:
        sys.stdin.read()  # returns when the parent closes stdin or dies
        os._exit(PARENT_GONE)

    threading.Thread(target=parent_gone, daemon=True).start()
    timer = threading.Timer(float(request['seconds']), os._exit,
                            (OUT_OF_TIME, ))
    timer.daemon = True
    timer.start()
    try:
        import hf_xet
    except ImportError as e:
        answer(unavailable=_one_line(e))
        return 0
    shown = [-1]

    def progress(group, _items=None) -> None:
        done = int(group.total_bytes_completed)
        if done != shown[0]:
            shown[0] = done
            answer(bytes=done)

    try:
        session = hf_xet.XetSession()
        with session.new_file_download_group(
                endpoint=request['cas_url'],
                token=request['token'],
                token_expiry_unix_secs=request['token_expiry'],
                token_refresh_url=request['token_refresh_url'],
                token_refresh_headers=request['token_refresh_headers'],
                custom_headers=request['headers'],
                progress_callback=progress) as group:
            group.start_download_file(
                hf_xet.XetFileInfo(request['hash'], request['size']),
                request['dest'])
    except Exception as e:  # noqa: BLE001 (reported to the parent)
        answer(error=_one_line(e))
        return 1
    answer(done=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
