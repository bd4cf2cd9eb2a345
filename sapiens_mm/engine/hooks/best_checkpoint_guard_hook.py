"""Keep a resumed run from deleting files it did not write."""
import os.path as osp
import secrets
from typing import Optional

from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.registry import HOOKS

__all__ = ['BestCheckpointGuardHook', 'RUN_ID_KEY']

#: ``message_hub.runtime_info`` key of the run's identity: a random token
#: drawn when a run starts afresh and carried by every checkpoint it saves
#: and every resume of them.
RUN_ID_KEY = 'sapiens_mm_run_id'


def _run_id_of(path: str) -> Optional[str]:
    """The run identity a checkpoint file records, or None (not a readable
    checkpoint of a guarded run). Tensors are memory-mapped, not read."""
    from sapiens_mm.checkpoint import load_file
    try:
        ckpt = load_file(path, mmap=True)
        run_id = ckpt['message_hub']['runtime_info'][RUN_ID_KEY]
    except Exception:  # noqa: BLE001 (unreadable, foreign, a folder...)
        return None
    return run_id if isinstance(run_id, str) else None


def _checkpoint_dir(hook, work_dir: str) -> str:
    """The folder ``CheckpointHook`` saves to and deletes from: its
    ``before_train``, which runs after this hook's, joins an ``out_dir``
    other than the work dir with the work dir's name, every time."""
    out_dir = getattr(hook, 'out_dir', None)
    if out_dir is None or str(out_dir) == work_dir:
        return work_dir
    return osp.join(str(out_dir), osp.basename(work_dir.rstrip(osp.sep)))


@HOOKS.register_module()
class BestCheckpointGuardHook(Hook):
    """Forget what a resumed checkpoint says to delete unless it names
    checkpoints the resumed run itself wrote: its "previous best
    checkpoint" and its list of checkpoints to rotate out
    (``keep_ckpt_ids``).

    mmengine's ``CheckpointHook(save_best=...)`` removes the previous best
    checkpoint when it saves a better one, and after ``--resume`` it takes
    that path from the checkpoint (``message_hub.runtime_info.best_ckpt``),
    wherever it points; with ``max_keep_ckpts`` it deletes
    ``<out_dir>/epoch_<id>.pth`` (or ``iter_<id>.pth``) for every surplus id
    of the resumed ``keep_ckpt_ids``. A checkpoint from elsewhere (copied
    into the work dir under the name of the newest checkpoint, say) would
    make it delete the user's own files.

    Every run carries an identity (``runtime_info['sapiens_mm_run_id']``,
    :data:`RUN_ID_KEY`): drawn at random when a run starts afresh, saved in
    each of its checkpoints and restored by ``--resume``. Before
    ``CheckpointHook`` reads them, this hook keeps

    - an id of ``keep_ckpt_ids`` only when the checkpoint file it names
      exists and records this run's identity (read with tensors
      memory-mapped);
    - the previous best checkpoint only when it lies in the checkpoint
      folder, is named ``best_*.pth`` and records this run's identity;

    everything else is dropped with a log line: those files are kept, and
    only checkpoints this run saves are rotated out or replaced. A
    checkpoint without an identity (written by plain mmengine) starts a new
    one, so its listed files are all kept.

    ``tools/train.py`` adds this hook to every run.
    """

    priority = 'VERY_HIGH'  # before CheckpointHook (VERY_LOW) reads it

    def before_train(self, runner) -> None:
        info = runner.message_hub.runtime_info
        run_id = info.get(RUN_ID_KEY)
        if not isinstance(run_id, str) or not run_id:
            run_id = self._new_run_id()
            runner.message_hub.update_info(RUN_ID_KEY, run_id)
        hooks = [h for h in getattr(runner, 'hooks', [])
                 if type(h).__name__ == 'CheckpointHook']
        folders = {_checkpoint_dir(h, runner.work_dir) for h in hooks} or \
            {runner.work_dir}
        self._guard_keep_ids(runner, info, run_id, hooks, folders)
        for key in [k for k in info if str(k).startswith('best_ckpt')]:
            path = info[key]
            ok = isinstance(path, str) and path.endswith('.pth') and \
                osp.basename(path).startswith('best_') and \
                osp.realpath(osp.dirname(path)) in {
                    osp.realpath(f) for f in folders} and \
                _run_id_of(path) == run_id
            if ok:
                continue
            info.pop(key)
            print_log(
                f'The resumed checkpoint names {path!r} as its previous best '
                f'checkpoint ({key}); it is not a best checkpoint this run '
                'wrote, so it will not be removed when a new best checkpoint '
                'is saved.', logger='current', level=30)

    @staticmethod
    def _new_run_id() -> str:
        """A fresh identity, the same on every rank of a distributed run."""
        from mmengine.dist import broadcast_object_list, is_distributed
        token = [secrets.token_hex(16)]
        if is_distributed():
            broadcast_object_list(token)
        return token[0]

    @staticmethod
    def _guard_keep_ids(runner, info, run_id: str, hooks, folders) -> None:
        """Keep only the ids of ``keep_ckpt_ids`` whose checkpoint file
        records this run's identity."""
        if 'keep_ckpt_ids' not in info:
            return
        ids = info['keep_ckpt_ids']
        templates = {getattr(h, 'filename_tmpl', None) for h in hooks}
        templates = {t for t in templates if isinstance(t, str)} or \
            {'epoch_{}.pth', 'iter_{}.pth'}
        valid = isinstance(ids, list) and all(
            isinstance(i, int) and not isinstance(i, bool) and i >= 0
            for i in ids)

        def written_here(i: int) -> bool:
            files = [p for p in (osp.join(folder, tmpl.format(i))
                                 for folder in folders for tmpl in templates)
                     if osp.lexists(p)]
            return bool(files) and all(_run_id_of(p) == run_id
                                       for p in files)

        kept = [i for i in ids if written_here(i)] if valid else []
        if kept == ids:
            return
        info['keep_ckpt_ids'] = kept
        dropped = [i for i in ids if i not in kept] if valid else ids
        print_log(
            'The resumed checkpoint lists checkpoints to rotate out '
            f'(keep_ckpt_ids={str(ids)[:80]}), but {str(dropped)[:80]} are '
            f'not checkpoints this run wrote in {", ".join(sorted(folders))}'
            '; they will not be deleted (only checkpoints this run saves '
            'are rotated out by max_keep_ckpts).', logger='current',
            level=30)
