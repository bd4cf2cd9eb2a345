"""Error handling shared by the command lines (``tools/*.py``,
``python -m sapiens_mm``).

A user error (a bad file, a wrong option, an unwritable folder...) ends the
program with one line on stderr that says what is wrong, and exit code 1;
the Python traceback is shown only with ``--debug``. Ctrl-C ends it with
exit code 130 (128 + SIGINT, the shells' convention).
"""
import argparse
import contextlib
import sys
import warnings
from typing import Any, Callable, List, Optional, Sequence

from sapiens_mm.utils.upstream_warnings import (UPSTREAM_WARNINGS,
                                                quiet_upstream_warnings,
                                                upstream_warnings_shown)

__all__ = [
    'add_debug_argument', 'one_line', 'run_cli', 'THIRD_PARTY_WARNINGS',
    'hide_third_party_warnings', 'third_party_warnings', 'INTERRUPTED_EXIT_CODE'
]

#: Exit code of a command line stopped by Ctrl-C: 128 + SIGINT (2).
INTERRUPTED_EXIT_CODE = 130

#: Warnings of other packages a command line does not show without
#: ``--verbose`` (see :mod:`sapiens_mm.utils.upstream_warnings`).
THIRD_PARTY_WARNINGS = UPSTREAM_WARNINGS


def hide_third_party_warnings() -> None:
    """Add filters that hide the :data:`THIRD_PARTY_WARNINGS`, for the
    whole process of a command line (library code uses the scope of
    :func:`~sapiens_mm.utils.upstream_warnings.quiet_upstream_warnings`)."""
    for category, module in THIRD_PARTY_WARNINGS:
        warnings.filterwarnings('ignore', category=category, module=module)


@contextlib.contextmanager
def third_party_warnings(verbose: bool):
    """Within: the :data:`THIRD_PARTY_WARNINGS` hidden, or with ``verbose``
    shown (the library's own scopes too); the warning filters are restored
    on exit."""
    with upstream_warnings_shown(verbose), quiet_upstream_warnings():
        yield


#: Exception types whose message is written for users: shown without the
#: type name.
_USER_ERRORS = (ValueError, OSError, FloatingPointError, RuntimeError)


def add_debug_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--debug`` (show tracebacks) to a CLI's parser."""
    parser.add_argument('--debug', action='store_true',
                        help='on an error, show the full Python traceback '
                        'instead of one line')


def one_line(error: BaseException) -> str:
    """``error`` as one line: its message (its lines joined), prefixed with
    the type name unless it is a user-facing error type."""
    text = ' '.join(part.strip() for part in str(error).splitlines()
                    if part.strip())
    if isinstance(error, KeyError) and error.args:
        text = f'missing key {error.args[0]!r}'
    if not text:
        return type(error).__name__
    if isinstance(error, _USER_ERRORS) and not isinstance(
            error, (NotImplementedError, RecursionError)):
        return text
    return f'{type(error).__name__}: {text}'


def run_cli(main: Callable[[List[str]], Any],
            argv: Optional[Sequence[str]] = None,
            prog: Optional[str] = None) -> Any:
    """Run ``main(argv)`` and turn an exception into one line and exit
    code 1 (``--debug`` in ``argv``: re-raise it with its traceback), and
    Ctrl-C into ``<prog>: interrupted`` and exit code
    :data:`INTERRUPTED_EXIT_CODE`.

    Args:
        main: The CLI body; it parses ``argv`` itself.
        argv: Arguments (default: ``sys.argv[1:]``).
        prog: Program name for the message (default: ``sys.argv[0]``).

    Returns:
        What ``main`` returns.

    Raises:
        SystemExit: Exit code 1, the message written to stderr; 130 after
            Ctrl-C.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    prog = prog or sys.argv[0]
    try:
        return main(argv)
    except KeyboardInterrupt:
        if '--debug' in argv:
            raise
        print(f'{prog}: interrupted', file=sys.stderr, flush=True)
        raise SystemExit(INTERRUPTED_EXIT_CODE) from None
    except Exception as e:  # noqa: BLE001 (every error becomes one line)
        if '--debug' in argv:
            raise
        # SystemExit with a message: Python writes it to stderr, exit code 1
        raise SystemExit(f'{prog}: error: {one_line(e)} (--debug shows the '
                         'traceback)') from None
