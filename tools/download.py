"""Download released Sapiens / Sapiens2 models by name, or list them.

    python tools/download.py --list
    python tools/download.py sapiens2-pose-0.4b sapiens-seg-1b
    python tools/download.py sapiens2-pose-0.4b --dest checkpoints/

Files go to the Hugging Face cache (``HF_HOME`` / ``HF_HUB_CACHE``), where
every sapiens_mm command (and ``HF_HUB_OFFLINE=1`` runs) finds them; with
``--dest`` a copy is also written there. Each file is checked (size, hash)
before it enters the cache; a connection that drops is continued at once
(HTTP range request). Prefetch on a machine with internet, then copy the
cache to an offline cluster. Gated repositories need ``HF_TOKEN``;
``HF_ENDPOINT`` selects a mirror; ``SAPIENS_MM_HUB_TIMEOUT`` /
``SAPIENS_MM_HUB_MIN_SPEED`` set the time limits (docs/security.md).
"""
import argparse
import os
import os.path as osp
import shutil
import sys

from sapiens_mm.cli import add_debug_argument, run_cli


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description='Download released Sapiens / Sapiens2 models by name '
        '(registry name, alias or Hub repository id), or list them.')
    p.add_argument('names', nargs='*', metavar='NAME',
                   help='models to download (see --list)')
    p.add_argument('--list', action='store_true',
                   help='list every model: name, task, size, licence, file '
                   'size (when cached) and repository')
    p.add_argument('--dest', default=None,
                   help='also copy each file into this folder')
    p.add_argument('--revision', default=None,
                   help='Hub revision (branch, tag or commit) instead of the '
                   'registry\'s')
    add_debug_argument(p)
    args = p.parse_args(argv)
    if not args.names and not args.list:
        p.error('give model names, or --list')
    return args


def _table(rows):
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return '\n'.join('  '.join(str(c).ljust(w) for c, w in zip(r, widths))
                     .rstrip() for r in rows)


def _list() -> str:
    from sapiens_mm.zoo.cards import model_cards
    from sapiens_mm.zoo.hub import cached_file
    rows = [('NAME', 'TASK', 'SIZE', 'LICENCE', 'FILE', 'REPOSITORY')]
    for card in model_cards().values():
        path = cached_file(card)
        size = f'{osp.getsize(path) / 2**20:.1f} MiB' if path else '-'
        repo = card.repo_id + (' (third party)' if card.third_party else '')
        rows.append((card.name, card.task, card.size or '-', card.license,
                     size, repo))
    return _table(rows)


def _copy(path: str, dest: str) -> str:
    from sapiens_mm.engine.fileio import ensure_writable_dir
    from sapiens_mm.zoo.hub import sha256_of
    ensure_writable_dir(dest, 'destination folder (--dest)')
    target = osp.join(dest, osp.basename(path))
    if osp.exists(target):
        if osp.getsize(target) == osp.getsize(path) and \
                sha256_of(target) == sha256_of(path):
            return target
        raise FileExistsError(
            f'{target} exists and differs from the downloaded file; move it '
            'away or choose another --dest.')
    tmp = f'{target}.part{os.getpid()}'
    shutil.copyfile(path, tmp)
    os.replace(tmp, target)
    return target


def main(argv=None):
    args = parse_args(argv)
    from sapiens_mm.zoo.cards import find_card
    from sapiens_mm.zoo.hub import fetch
    if args.list:
        print(_list())
    cards = [find_card(name) for name in args.names]  # all names first
    for card in cards:
        path = fetch(card, args.revision, check_remote=True)
        if args.dest:
            path = _copy(path, args.dest)
        print(f'{card.name}: {path}')


if __name__ == '__main__':
    run_cli(main, sys.argv[1:], 'tools/download.py')
