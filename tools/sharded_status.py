"""State of a sharded run's output folder (inference or curation).

    python tools/sharded_status.py OUT_DIR

Prints the progress of each rank of the latest run and, for a run that did
not finish, which rank stopped and on which inputs (what tools/dist_infer.sh
and tools/slurm_infer.sh print when a rank fails). A progress file that is
not one (edited, cut short, from another program) gets one line naming it
and what is wrong; it is left out. Reads only; writes nothing.

Exit code: 0 when the run finished, 75 when every unfinished rank was
stopped by SIGTERM (resumable: run the same command again or requeue), 1
when a rank crashed or was killed (re-running also resumes) or a progress
file is malformed, 2 when OUT_DIR holds no usable progress file.
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
    problems = []
    progress = read_progress(args.out_dir, problems)
    for line in problems:
        print(line, file=sys.stderr)
    if not progress:
        if not problems:
            print(f'{args.out_dir}: no sharded run here (no manifests/'
                  'progress.rank*.json).', file=sys.stderr)
        return 2
    run_id = max(p['run_id'] for _, p in progress)
    print(progress_line(args.out_dir, run_id))
    lines = unfinished_ranks(args.out_dir)
    for line in lines:
        print(line)
    if not lines:
        return 1 if problems else 0
    if all(p.get('stopped') for _, p in progress
           if p['run_id'] == run_id and not p['finished']):
        return REQUEUE_EXIT_CODE
    return 1


if __name__ == '__main__':
    sys.exit(main())
