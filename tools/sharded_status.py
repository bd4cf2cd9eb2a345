"""State of a sharded run's output folder (inference or curation).

    python tools/sharded_status.py OUT_DIR

Prints the progress of each rank of the latest run and, for a run that did
not finish, which rank stopped and on which input (what tools/dist_infer.sh
and tools/slurm_infer.sh print when a rank fails).

Exit code: 0 when the run finished, 75 when every unfinished rank was
stopped by SIGTERM (resumable: run the same command again or requeue), 1
when a rank crashed or was killed (re-running also resumes), 2 when OUT_DIR
holds no sharded run.
"""
import argparse
import sys

from sapiens_mm.engine.sharded import (REQUEUE_EXIT_CODE, progress_line,
                                       unfinished_ranks)
from sapiens_mm.engine.sharded.manifest import read_progress


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description='Progress of a sharded run and the ranks that did not '
        'finish.')
    parser.add_argument('out_dir', help='the run\'s --out-dir')
    args = parser.parse_args(argv)
    progress = read_progress(args.out_dir)
    if not progress:
        print(f'{args.out_dir}: no sharded run here (no manifests/'
              'progress.rank*.json).', file=sys.stderr)
        return 2
    run_id = max(p.get('run_id') or '' for _, p in progress)
    print(progress_line(args.out_dir, run_id, None))
    lines = unfinished_ranks(args.out_dir)
    for line in lines:
        print(line)
    if not lines:
        return 0
    if all(p.get('stopped') for _, p in progress
           if p.get('run_id') == run_id and not p.get('finished')):
        return REQUEUE_EXIT_CODE
    return 1


if __name__ == '__main__':
    sys.exit(main())
