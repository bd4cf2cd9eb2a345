"""What an ``fsync`` per output file costs a sharded run, measured in one go.

    python tools/analysis/fsync_cost.py                    # 10,000 outputs here
    python tools/analysis/fsync_cost.py --dir /lustre/x --num 10000 --rounds 3

Runs the same sharded run (:class:`sapiens_mm.engine.sharded.ShardedRun`,
one process) three ways over ``--num`` inputs, each writing one small output
file (``--size`` bytes, atomically: temporary file and rename) and its
manifest record, in a fresh folder under ``--dir`` (the file system to
measure: put it where the outputs will go):

* ``fsync per file``: every output ``fsync``\\ ed with its folder before its
  record is written (``atomic_write(..., durable=True)``);
* ``commit per second``: what the runs do: outputs not ``fsync``\\ ed; once a
  second one ``syncfs`` of the file system, then a commit line in the
  manifest (:class:`~sapiens_mm.engine.sharded.ManifestWriter`);
* ``no sync``: neither (the floor: the writes alone; a machine crash may
  lose any of it).

Prints the seconds of each and the ratios to ``no sync``, rounds
interleaved. The figures depend on the file system and on what else writes
to it (``syncfs`` also writes other programs' pending data on that file
system): measure on a quiet machine, on the file system of the runs.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
for folder in (ROOT, HERE):
    if folder not in sys.path:
        sys.path.insert(0, folder)

from sharded_scaling import cpu_model  # noqa: E402

MODES = ('fsync per file', 'commit per second', 'no sync')


def file_system(path: str) -> str:
    """``<type> on <mount point>`` of the file system holding ``path``
    (``/proc/mounts``; ``?`` elsewhere)."""
    path = os.path.realpath(path)
    best = ('?', '?')
    try:
        with open('/proc/mounts', encoding='utf-8') as f:
            for line in f:
                _, mount, kind = line.split()[:3]
                inside = path == mount or path.startswith(
                    mount.rstrip('/') + '/')
                if inside and len(mount) >= len(best[1]):
                    best = (kind, mount)
    except OSError:
        pass
    return f'{best[0]} on {best[1]}'


def one_run(folder: str, source: str, mode: str, num: int,
            size: int) -> float:
    """Seconds of one sharded run of ``num`` inputs (all the file
    ``source``, under their own names) in ``mode``."""
    from sapiens_mm.engine.fileio import atomic_write
    from sapiens_mm.engine.sharded import ListedItem, Outcome, ShardedRun
    from sapiens_mm.engine.sharded import manifest
    out = os.path.join(folder, mode.replace(' ', '_'))
    payload = json.dumps({'keypoints': 'x' * max(size - 20, 0)})
    durable = mode == 'fsync per file'

    def process(batch):
        outcomes = []
        for item in batch:
            target = os.path.join(out, 'pose', f'{item.name}.json')
            atomic_write(payload, target, durable=durable)
            outcomes.append(Outcome('ok', [target], frames=1))
        return outcomes

    items = [ListedItem(f'img{i:06d}', source, 'image') for i in range(num)]
    real_sync = manifest.sync_file_system
    if mode == 'no sync':
        manifest.sync_file_system = lambda path: None
    try:
        start = time.perf_counter()
        run = ShardedRun(out, {}, 0, 1, progress_interval=0)
        run.start()
        run.run(items, process, batch_size=1)
        summary = run.finish()
        seconds = time.perf_counter() - start
    finally:
        manifest.sync_file_system = real_sync
    assert summary['processed'] == num, summary
    return seconds


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description='Cost of an fsync per output file against the sharded '
        'runs\' commit once a second, in one run.')
    parser.add_argument('--dir', default='.', help='a folder on the file '
                        'system to measure (default: the current folder)')
    parser.add_argument('--num', type=int, default=10000,
                        help='outputs per run (default: %(default)s)')
    parser.add_argument('--size', type=int, default=2048,
                        help='bytes per output (default: %(default)s)')
    parser.add_argument('--rounds', type=int, default=1,
                        help='rounds, the modes interleaved in each '
                        '(default: %(default)s)')
    args = parser.parse_args(argv)
    from mmengine.logging import MMLogger
    MMLogger.get_current_instance().setLevel('WARNING')
    folder = tempfile.mkdtemp(prefix='fsync_cost_', dir=args.dir)
    try:
        source = os.path.join(folder, 'input.jpg')
        with open(source, 'wb') as f:
            f.write(b'jpeg')
        times = {m: [] for m in MODES}
        for r in range(args.rounds):
            for mode in MODES:
                sub = os.path.join(folder, f'round{r}')
                times[mode].append(
                    one_run(sub, source, mode, args.num, args.size))
                shutil.rmtree(sub)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f'CPU: {cpu_model()}; {os.cpu_count()} cores; file system: '
          f'{file_system(args.dir)}')
    print(f'{args.num} outputs of {args.size} bytes, {args.rounds} '
          'round(s), best of each:')
    best = {m: min(t) for m, t in times.items()}
    for mode in MODES:
        per = 1e6 * best[mode] / args.num
        print(f'  {mode:<18} {best[mode]:8.2f} s  ({per:7.1f} us per output, '
              f'{best[mode] / best["no sync"]:.2f}x no sync)')
    print(f'fsync per file / commit per second: '
          f'{best["fsync per file"] / best["commit per second"]:.2f}x')


if __name__ == '__main__':
    main()
