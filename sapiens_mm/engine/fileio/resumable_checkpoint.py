"""Pick the checkpoint that ``tools/train.py --resume auto`` resumes from.

mmengine's ``find_latest_checkpoint`` trusts ``<work_dir>/last_checkpoint``
blindly. That file is written with a plain ``open(..., 'w')`` after each
save, and a checkpoint written without :mod:`atomic writes
<sapiens_mm.engine.fileio.atomic_local_backend>` (older runs, other tools, a
node that lost its page cache) may be truncated. :func:`find_resumable_checkpoint`
checks the candidate's structure first and falls back to the newest complete
``epoch_*.pth`` / ``iter_*.pth`` of the work dir. The check reads only the
zip directory at the end of the file, not the tensors.
"""
import os
import os.path as osp
import re
import zipfile
from typing import List, Optional, Tuple

from mmengine.logging import print_log

__all__ = [
    'is_complete_checkpoint', 'find_resumable_checkpoint', 'check_resumable'
]

_CKPT_RE = re.compile(r'^(epoch|iter)_(\d+)\.pth$')


def is_complete_checkpoint(path: str) -> bool:
    """Whether ``path`` is a complete ``torch.save`` checkpoint.

    A file must be a readable zip archive (PyTorch's format since 1.6) with
    a ``data.pkl`` record; a file cut short during writing loses the zip
    directory at its end and fails this check. A folder (sharded FSDP /
    DeepSpeed checkpoint) must hold at least one file and every ``*.pth``
    in it must pass.

    Args:
        path: File or folder.
    """
    if osp.isdir(path):
        names = sorted(os.listdir(path))
        shards = [n for n in names if n.endswith('.pth')]
        if not names:
            return False
        return all(is_complete_checkpoint(osp.join(path, n)) for n in shards)
    if not osp.isfile(path) or osp.getsize(path) == 0:
        return False
    try:
        with zipfile.ZipFile(path) as zf:
            return any(
                n == 'data.pkl' or n.endswith('/data.pkl')
                for n in zf.namelist())
    except (zipfile.BadZipFile, OSError, EOFError, ValueError):
        return False


def check_resumable(path: str) -> None:
    """Refuse ``--resume PATH`` when ``PATH`` is not a training checkpoint.

    mmengine resumes from ``checkpoint['meta']['epoch']`` and the message
    hub; a plain state dict (official weights, a ``.safetensors`` file)
    fails deep inside the runner with ``KeyError: 'epoch'``. The check reads
    only the pickle record (``data.pkl``, no tensor data) for the names a
    runner checkpoint stores. Folders (sharded checkpoints) are left to the
    runner.

    Raises:
        FileNotFoundError: No such file or folder.
        ValueError: Not a complete ``torch.save`` file, or one without the
            runner's ``meta`` (epoch, iter) and ``message_hub``: the message
            says to use ``load_from`` to start from its weights.
    """
    if osp.isdir(path):
        return
    if not osp.isfile(path):
        raise FileNotFoundError(f'--resume: checkpoint not found: {path}')
    record = b''
    if is_complete_checkpoint(path):
        with zipfile.ZipFile(path) as zf:
            name = next(n for n in zf.namelist()
                        if n == 'data.pkl' or n.endswith('/data.pkl'))
            record = zf.read(name)
    if not all(key in record for key in (b'meta', b'epoch', b'iter',
                                         b'message_hub')):
        raise ValueError(
            f'--resume {path}: not a training checkpoint of mmengine\'s '
            'Runner (it has no meta epoch / iter and message hub, e.g. '
            'plain weights), so there is no training state to resume. To '
            'start a new run from its weights, pass --cfg-options '
            f'load_from={path} instead.')


def _candidates(work_dir: str) -> List[str]:
    """``epoch_N.pth`` / ``iter_N.pth`` of ``work_dir``, newest first."""
    found: List[Tuple[float, int, str]] = []
    for name in os.listdir(work_dir):
        m = _CKPT_RE.match(name)
        if m:
            path = osp.join(work_dir, name)
            found.append((osp.getmtime(path), int(m.group(2)), path))
    return [p for _, _, p in sorted(found, reverse=True)]


def find_resumable_checkpoint(work_dir: str) -> Optional[str]:
    """The latest complete checkpoint of ``work_dir``, or None.

    Tries the path named in ``<work_dir>/last_checkpoint`` (as written, then
    the same file name inside ``work_dir``, for a moved work dir), then
    every ``epoch_*.pth`` / ``iter_*.pth`` of ``work_dir``, newest first.
    Incomplete candidates are skipped with a warning.

    Args:
        work_dir: The Runner's work dir.

    Returns:
        A checkpoint path, or None when there is nothing to resume from.
    """
    if not osp.isdir(work_dir):
        return None
    tried: List[str] = []

    def usable(path: str) -> bool:
        if osp.abspath(path) in map(osp.abspath, tried):
            return False
        if is_complete_checkpoint(path):
            return True
        tried.append(path)
        return False

    last_file = osp.join(work_dir, 'last_checkpoint')
    if osp.isfile(last_file):
        with open(last_file) as f:
            named = f.read().strip()
        if not named:
            print_log(f'{last_file} is empty (the run was killed while '
                      'writing it); looking for checkpoints in the work dir.',
                      logger='current', level=30)
        for path in ((named, osp.join(work_dir, osp.basename(named)))
                     if named else ()):
            if usable(path):
                return path
    for path in _candidates(work_dir):
        if usable(path):
            if tried:
                print_log(f'Skipped incomplete or missing checkpoint(s) '
                          f'{tried}; resuming from {path}.',
                          logger='current', level=30)
            return path
    if tried:
        print_log(f'No complete checkpoint to resume from in {work_dir} '
                  f'(incomplete or missing: {tried}).', logger='current',
                  level=30)
    return None
