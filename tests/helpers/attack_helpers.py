"""What the tests of hostile files share: a package planted where Python
imports from, and a snapshot of a folder to show that a refused file
changed nothing outside the run's own output."""
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile
import threading
import zlib
from pathlib import Path
from typing import Dict, Iterable, Optional, Tuple


def plant_package(folder: Path, name: str, marker: Path) -> Path:
    """A package ``name`` in ``folder`` (and its ``registry`` and ``utils``
    modules, which mmengine imports for a scope) that creates ``marker``
    when any of them is imported."""
    pkg = folder / name
    pkg.mkdir(parents=True, exist_ok=True)
    payload = f'open({str(marker)!r}, "a").write("imported\\n")\n'
    for module in ('__init__.py', 'registry.py', 'utils.py'):
        (pkg / module).write_text(payload)
    return pkg


def record_digest(path) -> None:
    """Put ``path``'s SHA-256 in the session's ``.pt2`` trust store
    directly, as a store written by hand (or before the archive checks
    refused such files) may hold it."""
    from sapiens_mm.deploy import trust_store_path
    store = Path(trust_store_path())
    data = dict(format='sapiens_mm.trusted_pt2', version=1, files={})
    if store.exists():
        data = json.loads(store.read_text())
    store.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
    data['files'][digest] = dict(path=str(path), source='vouched', time='')
    store.write_text(json.dumps(data))
    store.chmod(0o600)


def tiff_two_sizes(path, first, last):
    """An RGB TIFF whose width and height tags appear twice: ``first`` x
    ``first``, then ``last`` x ``last`` (Pillow takes the last tag, libtiff
    and so OpenCV the first). Its ``first`` strips of one row all point at
    one deflate blob of a row of zeros, so the file is small and
    ``cv2.imdecode`` fills ``first``**2 * 3 bytes from it."""
    row = zlib.compress(b'\0' * (first * 3), 9)
    tags = [(256, 4, 1, first), (257, 4, 1, first), (256, 4, 1, last),
            (257, 4, 1, last), (258, 3, 3, 'bits'), (259, 3, 1, 8),
            (262, 3, 1, 2), (273, 4, first, 'offsets'), (277, 3, 1, 3),
            (278, 4, 1, 1), (279, 4, first, 'counts')]
    bits = 8 + 2 + 12 * len(tags) + 4
    offsets = bits + 6
    counts = offsets + 4 * first
    blob = counts + 4 * first
    where = dict(bits=bits, offsets=offsets, counts=counts)
    out = b'II*\0' + struct.pack('<IH', 8, len(tags))
    for tag, kind, count, value in tags:
        value = where.get(value, value)
        if kind == 3 and count == 1:
            out += struct.pack('<HHIHH', tag, kind, count, value, 0)
        else:
            out += struct.pack('<HHII', tag, kind, count, value)
    out += struct.pack('<I', 0) + struct.pack('<HHH', 8, 8, 8)
    out += struct.pack(f'<{first}I', *[blob] * first)
    out += struct.pack(f'<{first}I', *[len(row)] * first) + row
    path.write_bytes(out)
    return str(path)


def tree_state(root: Path,
               skip: Iterable[Path] = ()) -> Dict[str, Tuple]:
    """``{relative path: (mode, link target or sha256)}`` of every file,
    link and folder under ``root`` except those under ``skip`` (folders get
    an empty digest): equal before and after a run that changed nothing
    there."""
    skip = [Path(s).resolve() for s in skip]
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames
                       if (here / d).resolve() not in skip]
        for name in dirnames + filenames:
            path = here / name
            if path.resolve() in skip:
                continue
            st = path.lstat()
            digest = ''
            if path.is_symlink():
                digest = 'link:' + os.readlink(path)
            elif path.is_file():
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            state[str(path.relative_to(root))] = (st.st_mode, digest)
    return state


def changed(before: Dict[str, Tuple[int, str]],
            after: Dict[str, Tuple[int, str]]) -> Dict[str, str]:
    """What differs between two :func:`tree_state` snapshots."""
    out = {}
    for path in sorted(set(before) | set(after)):
        if path not in after:
            out[path] = 'deleted'
        elif path not in before:
            out[path] = 'appeared'
        elif before[path] != after[path]:
            out[path] = 'changed'
    return out


def run_measured(args, cwd: Path, env: Optional[dict] = None,
                 timeout: float = 300) -> Tuple[int, str, str, float]:
    """Run ``[python, *args]`` in ``cwd``; return ``(exit code, stdout,
    stderr, peak resident memory in MiB)``, the peak being the child's own
    ``ru_maxrss`` (from ``wait4``)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([sys.executable, *args], cwd=str(cwd),
                                stdout=out, stderr=err, env=env)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return (proc.returncode, out.read().decode(errors='replace'),
                err.read().decode(errors='replace'), usage.ru_maxrss / 1024)
