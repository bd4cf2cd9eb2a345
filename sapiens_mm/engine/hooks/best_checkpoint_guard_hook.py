"""Keep a resumed run from deleting files outside its own work dir."""
import os.path as osp
from typing import Optional

from mmengine.hooks import Hook
from mmengine.logging import print_log
from mmengine.registry import HOOKS

__all__ = ['BestCheckpointGuardHook']


def _inside(path: str, folder: str) -> bool:
    path, folder = osp.realpath(path), osp.realpath(folder)
    return osp.commonpath([path, folder]) == folder


@HOOKS.register_module()
class BestCheckpointGuardHook(Hook):
    """Forget what a resumed checkpoint says to delete unless it names this
    run's own checkpoints: its "previous best checkpoint" and its list of
    checkpoints to rotate out (``keep_ckpt_ids``).

    mmengine's ``CheckpointHook(save_best=...)`` removes the previous best
    checkpoint when it saves a better one, and after ``--resume`` it takes
    that path from the checkpoint (``message_hub.runtime_info.best_ckpt``),
    wherever it points: resuming into a new work dir from another run's
    checkpoint deletes that run's best checkpoint, and a crafted checkpoint
    can name any file. Before ``CheckpointHook`` reads it, this hook keeps
    the recorded path only when

    - the resumed checkpoint (``load_from``) is inside the current work dir
      (the run continues itself), and
    - the recorded file lies directly in the work dir and is named
      ``best_*.pth``;

    otherwise the entry is dropped with a log line: the file is kept, and
    the resumed run starts its own best checkpoint.

    With ``max_keep_ckpts``, ``CheckpointHook`` deletes the file (or
    folder) ``<out_dir>/iter_<id>.pth`` for every surplus id of the resumed
    ``message_hub.runtime_info.keep_ckpt_ids``, at the start and as new
    checkpoints are saved. The list is kept only when the resumed
    checkpoint is inside the work dir and is itself the newest checkpoint
    it lists (a checkpoint records its own step last); otherwise it is
    dropped with a log line and only checkpoints this run saves are
    rotated out.

    ``tools/train.py`` adds this hook to every run.
    """

    priority = 'VERY_HIGH'  # before CheckpointHook (VERY_LOW) reads it

    def before_train(self, runner) -> None:
        info = runner.message_hub.runtime_info
        work_dir = runner.work_dir
        cfg = getattr(runner, 'cfg', None) or {}
        # Runners built from keyword arguments have an empty cfg; mmengine
        # keeps load_from only as a private attribute then.
        load_from: Optional[str] = cfg.get('load_from') or getattr(
            runner, '_load_from', None)
        own_run = bool(load_from) and _inside(str(load_from), work_dir)
        self._guard_keep_ids(runner, info, own_run, load_from)
        for key in [k for k in info if str(k).startswith('best_ckpt')]:
            path = info[key]
            ok = own_run and isinstance(path, str) and osp.dirname(
                osp.realpath(path)) == osp.realpath(work_dir) and \
                osp.basename(path).startswith('best_') and \
                path.endswith('.pth')
            if ok:
                continue
            info.pop(key)
            print_log(
                f'The resumed checkpoint names {path!r} as its previous best '
                f'checkpoint ({key}); it is not a best checkpoint of this run '
                f'in {work_dir}, so it will not be removed when a new best '
                'checkpoint is saved.', logger='current', level=30)

    @staticmethod
    def _guard_keep_ids(runner, info, own_run: bool,
                        load_from: Optional[str]) -> None:
        """Drop ``keep_ckpt_ids`` unless the resumed checkpoint is this
        run's own newest checkpoint of that list."""
        if 'keep_ckpt_ids' not in info:
            return
        ids = info['keep_ckpt_ids']
        names = {'epoch_{}.pth', 'iter_{}.pth'}
        for hook in getattr(runner, 'hooks', []):
            tmpl = getattr(hook, 'filename_tmpl', None)
            if type(hook).__name__ == 'CheckpointHook' and \
                    isinstance(tmpl, str):
                names.add(tmpl)
        ok = own_run and isinstance(ids, list) and len(ids) > 0 and all(
            isinstance(i, int) and not isinstance(i, bool) and i >= 0
            for i in ids) and all(a < b for a, b in zip(ids, ids[1:])) and \
            osp.basename(str(load_from)) in {n.format(ids[-1])
                                             for n in names}
        if ok:
            return
        info.pop('keep_ckpt_ids')
        print_log(
            f'The resumed checkpoint {load_from} lists earlier checkpoints '
            f'to rotate out (keep_ckpt_ids={str(ids)[:80]}), but it is not '
            f'the newest checkpoint of this run in {runner.work_dir}; none '
            'of them will be deleted (only checkpoints this run saves are '
            'rotated out by max_keep_ckpts).', logger='current', level=30)
