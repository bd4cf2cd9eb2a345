"""The commands and code of the documentation (README.md and docs/*.md), and
the entry points that run them.

A documented command is checked with the program's own argument parser: the
script (or ``python -m sapiens_mm``) runs as ``__main__`` exactly as a user
starts it, and stops right after its ``ArgumentParser.parse_args`` returns.
So a renamed or removed option, a wrong choice or a missing positional fails
as it would for the user, whatever the script's structure.
"""
import argparse
import contextlib
import re
import runpy
import shlex
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple
from unittest import mock

ROOT = Path(__file__).resolve().parents[2]
DOC_FILES = [ROOT / 'README.md'] + sorted(
    p for p in (ROOT / 'docs').rglob('*.md') if '_build' not in p.parts)
SHELL_LANGS = ('bash', 'sh', 'shell', 'console')
PYTHONS = ('python', 'python3', '.venv/bin/python')

def _gpus(value: str) -> None:
    if not value.isdigit():
        raise ValueError(f'the number of GPUs / processes is {value!r}')


def _need(args: List[str], n: int) -> None:
    if len(args) < n:
        raise ValueError(f'needs {n} leading arguments, got {args}')


def _dist_train(a):
    _need(a, 2)
    _gpus(a[1])
    return 'tools/train.py', [a[0], '--launcher', 'pytorch'] + a[2:]


def _dist_test(a):
    _need(a, 3)
    _gpus(a[2])
    return 'tools/test.py', [a[0], a[1], '--launcher', 'pytorch'] + a[3:]


def _slurm_train(a):
    _need(a, 4)
    return 'tools/train.py', [a[2], f'--work-dir={a[3]}', '--launcher=slurm'
                              ] + a[4:]


def _slurm_test(a):
    _need(a, 4)
    return 'tools/test.py', [a[2], a[3], '--launcher=slurm'] + a[4:]


def _sharded(n_lead: int, launcher: List[str]):
    """``dist_infer.sh NUM_PROCS`` / ``slurm_infer.sh PARTITION JOB_NAME``,
    then an optional script of tools/ (default tools/infer.py) and its
    arguments."""

    def to_script(a):
        _need(a, n_lead + 1)
        if n_lead == 1:
            _gpus(a[0])
        rest = a[n_lead:]
        script = 'tools/infer.py'
        if rest[0].endswith('.py'):
            script, rest = rest[0], rest[1:]
        return script, rest + launcher

    return to_script


#: Launcher scripts of tools/ and the script and argv each one runs, as
#: their ``exec`` / ``srun`` lines do.
LAUNCHERS = {
    'tools/dist_train.sh': _dist_train,
    'tools/dist_test.sh': _dist_test,
    'tools/slurm_train.sh': _slurm_train,
    'tools/slurm_test.sh': _slurm_test,
    'tools/dist_infer.sh': _sharded(1, ['--launcher', 'pytorch']),
    'tools/slurm_infer.sh': _sharded(2, ['--launcher=slurm']),
}
#: Modules run with ``python -m`` whose own parser checks the command
#: (besides sapiens_mm and its submodules).
MODULE_PARSERS = ('sphinx', )
#: Modules run with ``python -m`` that are not this project's and are not
#: checked (pytest's options are pytest's business).
EXTERNAL_MODULES = ('pytest', )


class Command:
    """One documented shell command.

    Attributes:
        source: ``file:line`` of the command's first line.
        text: The command, continuation lines joined.
        argv: The words of the command, environment assignments removed.
    """

    def __init__(self, source: str, text: str, argv: List[str]):
        self.source = source
        self.text = text
        self.argv = argv

    def __repr__(self) -> str:
        return f'{self.source}: {self.text}'


def fenced_blocks(path: Path) -> Iterator[Tuple[str, int, str]]:
    """``(language, first line number, text)`` of each fenced code block
    (```` ``` ```` fences; MyST directives such as ```` ```{toctree} ````
    are not code and are skipped)."""
    lines = path.read_text(encoding='utf-8').splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r'^(\s*)(`{3,}|~{3,})\s*([^\s`]*)', lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.groups()
        body = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][len(indent):])
            j += 1
        if not lang.startswith('{'):
            yield lang.lower(), i + 2, '\n'.join(body)
        i = j + 1


def shell_commands(path: Path) -> Iterator[Command]:
    """The commands of the shell code blocks of a Markdown file: lines joined
    at a trailing backslash, comments removed, environment assignments
    (``NNODES=2 ...``) dropped from ``argv``."""
    rel = path.relative_to(ROOT)
    for lang, first, text in fenced_blocks(path):
        if lang not in SHELL_LANGS:
            continue
        pending, start = '', None
        for k, line in enumerate(text.splitlines()):
            if start is None:
                start = first + k
            if line.rstrip().endswith('\\'):
                pending += line.rstrip()[:-1] + ' '
                continue
            full = (pending + line).strip()
            pending, line_no, start = '', start, None
            words = shlex.split(full, comments=True)
            while words and re.match(r'^[A-Za-z_][A-Za-z0-9_]*=', words[0]):
                words.pop(0)
            if words:
                yield Command(f'{rel}:{line_no}', full, words)


def all_commands() -> List[Command]:
    """Every shell command of README.md and docs/."""
    return [c for path in DOC_FILES for c in shell_commands(path)]


def python_blocks() -> Iterator[Tuple[str, str]]:
    """``(file:line, code)`` of every ``python`` code block."""
    for path in DOC_FILES:
        for lang, first, text in fenced_blocks(path):
            if lang in ('python', 'py'):
                yield f'{path.relative_to(ROOT)}:{first}', text


def section_commands(path: Path, heading: str) -> List[Command]:
    """The shell commands under one heading of a Markdown file, up to the
    next heading of the same or a higher level (``#`` lines inside code
    blocks are not headings)."""
    lines = path.read_text(encoding='utf-8').splitlines()
    first = last = None
    level = 0
    fence = None
    for number, line in enumerate(lines, 1):
        m = re.match(r'^\s*(`{3,}|~{3,})', line)
        if m and fence is None:
            fence = m.group(1)
            continue
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            continue
        m = re.match(r'^(#+) (.*?)\s*$', line)
        if not m:
            continue
        if first is None and m.group(2) == heading:
            first, level = number, len(m.group(1))
        elif first is not None and len(m.group(1)) <= level:
            last = number
            break
    if first is None:
        raise LookupError(f'{path}: no heading {heading!r}')
    return [
        c for c in shell_commands(path)
        if first < int(c.source.rsplit(':', 1)[1]) < (last or len(lines) + 1)
    ]


def entry_point(argv: List[str]) -> Optional[Tuple[str, str, List[str]]]:
    """What a command runs: ``('script', 'tools/x.py', args)`` (a script of
    tools/ or demo/),
    ``('module', name, args)``, ``('make', target, [])``, or None for a
    command that is not this project's (``pip``, ``apt-get``, ``python -m
    pytest``, ...).

    Raises:
        ValueError: A ``python`` or ``bash tools/...`` command whose form the
            docs test does not know (so it cannot pass unchecked).
    """
    head = argv[0]
    if head in PYTHONS:
        if len(argv) >= 3 and argv[1] == '-m':
            module = argv[2]
            if module in EXTERNAL_MODULES:
                return None
            if (module in MODULE_PARSERS or module == 'sapiens_mm'
                    or module.startswith('sapiens_mm.')):
                return 'module', module, argv[3:]
            raise ValueError(f'unknown module {module!r}')
        script = argv[1] if len(argv) > 1 else ''
        if re.match(r'^(tools|demo)/[\w/]+\.py$', script):
            return 'script', script, argv[2:]
        raise ValueError(f'unknown python command form {argv[:2]}')
    if head == 'bash' and len(argv) > 1 and argv[1].startswith('tools/'):
        script = argv[1]
        if script not in LAUNCHERS:
            raise ValueError(f'unknown launcher {script}')
        try:
            target, args = LAUNCHERS[script](argv[2:])
        except ValueError as e:
            raise ValueError(f'{script}: {e}') from None
        return 'script', target, args
    if head == 'make':
        return 'make', argv[1] if len(argv) > 1 else '', []
    return None


class Parsed(BaseException):
    """Raised in place of returning from ``ArgumentParser.parse_args`` (a
    ``BaseException``, so the tools' one-line error handlers let it pass)."""

    def __init__(self, namespace: argparse.Namespace):
        super().__init__(namespace)
        self.namespace = namespace


@contextlib.contextmanager
def _argv(argv: List[str]):
    saved = sys.argv
    sys.argv = argv
    try:
        yield
    finally:
        sys.argv = saved


def run_entry(kind: str, name: str, args: List[str]) -> None:
    """Run a script (tools/, demo/) or a module as ``__main__`` with ``args``, in
    this process (``SystemExit`` propagates)."""
    if kind == 'script':
        with _argv([name] + list(args)):
            runpy.run_path(str(ROOT / name), run_name='__main__')
    elif kind == 'module':
        if name == 'sphinx':
            from sphinx.cmd.build import main as sphinx_main
            code = sphinx_main(list(args))
            if code:
                raise SystemExit(code)
            return
        with _argv([name] + list(args)):
            runpy.run_module(name, run_name='__main__', alter_sys=False)
    else:
        raise ValueError(f'cannot run {kind} {name}')


def parse_only(kind: str, name: str, args: List[str]) -> argparse.Namespace:
    """The namespace the program's own parser makes of ``args``.

    Raises:
        SystemExit: The parser refused the arguments (argparse's message on
            stderr).
    """
    if kind == 'module' and name == 'sphinx':
        from sphinx.cmd.build import get_parser
        return get_parser().parse_args(args)
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(parser, *a, **kw):
        raise Parsed(original(parser, *a, **kw))

    with mock.patch.object(argparse.ArgumentParser, 'parse_args',
                           parse_then_stop):
        try:
            run_entry(kind, name, args)
        except Parsed as done:
            return done.namespace
    raise AssertionError(f'{name} ran to the end without parsing arguments')


def makefile_targets() -> Dict[str, str]:
    """``{target: recipe first line}`` of the Makefile."""
    text = (ROOT / 'Makefile').read_text()
    return {m.group(1): m.group(2) for m in re.finditer(
        r'^([\w.-]+):[^\n=]*\n\t?([^\n]*)', text, re.M)}


def project_venv(root: Path) -> Path:
    """``root/.venv``: the virtual environment the tests run in, seen from
    ``root`` (its interpreter linked, its ``pyvenv.cfg`` copied, its
    ``lib`` linked), so that a command printed or documented as
    ``.venv/bin/python ...`` runs in ``root`` exactly as written, without
    activating anything.

    Returns:
        The interpreter, ``root/.venv/bin/python``.
    """
    import os
    import shutil
    import sysconfig
    source = Path(sys.prefix)
    venv = Path(root) / '.venv'
    (venv / 'bin').mkdir(parents=True, exist_ok=True)
    if (source / 'pyvenv.cfg').is_file():
        shutil.copy(source / 'pyvenv.cfg', venv / 'pyvenv.cfg')
        lib = Path(sysconfig.get_paths()['purelib']).relative_to(
            source).parts[0]
        if not (venv / lib).exists():
            os.symlink(source / lib, venv / lib)
    python = venv / 'bin' / 'python'
    if not python.exists():
        os.symlink(os.path.realpath(sys.executable), python)
    return python
