"""Every command, path, link and Python example in README.md and docs/ is
valid for the code as it is: each ``python tools/X.py ...``,
``python -m sapiens_mm ...`` and ``bash tools/*.sh ...`` line of a shell code
block parses with that program's own argument parser, so renaming or
removing an option without updating the docs fails here."""
import re

import pytest

from doc_commands import (DOC_FILES, ROOT, all_commands, entry_point,
                          fenced_blocks, makefile_targets, parse_only,
                          shell_commands)

COMMANDS = all_commands()


def _project_commands():
    found = []
    for command in COMMANDS:
        try:
            entry = entry_point(command.argv)
        except ValueError as e:
            # an unknown form must fail, not pass unchecked
            found.append(pytest.param(command, e, id=command.source))
            continue
        if entry is not None:
            found.append(pytest.param(command, entry, id=command.source))
    return found


PROJECT_COMMANDS = _project_commands()


def test_the_docs_have_commands_to_check():
    """The extraction sees the documented commands (a broken extractor
    would make every other test here pass vacuously)."""
    texts = [p.values[0].text for p in PROJECT_COMMANDS]
    assert len(texts) >= 40
    for expected in ('tools/train.py', 'tools/test.py', 'tools/infer.py',
                     '-m sapiens_mm', 'tools/deploy/export.py',
                     'tools/deploy/run_exported.py', 'tools/slurm_train.sh',
                     'tools/dist_train.sh', 'tools/generate_synthetic.py'):
        assert any(expected in t for t in texts), expected


@pytest.mark.parametrize('command,entry', PROJECT_COMMANDS)
def test_documented_command_parses(command, entry, capsys):
    """The command's arguments are accepted by the program it runs."""
    if isinstance(entry, ValueError):
        pytest.fail(f'{command}: {entry}')
    kind, name, args = entry
    if kind == 'make':
        assert name in makefile_targets(), f'{command}: no make target'
        return
    if kind == 'script':
        assert (ROOT / name).is_file(), f'{command}: no {name}'
    try:
        parse_only(kind, name, args)
    except SystemExit as e:
        err = capsys.readouterr().err.strip().splitlines()
        pytest.fail(f'{command}\n  refused by {name} (exit {e.code}): '
                    f'{err[-1] if err else ""}')


def test_a_renamed_option_is_caught(capsys):
    """The check fails for an option the program does not have, and for a
    value outside an option's choices."""
    kind, name, args = entry_point(
        ['python', 'tools/infer.py', 'photo.jpg', '--out-dir', 'outputs'])
    assert parse_only(kind, name, args).out_dir == 'outputs'
    with pytest.raises(SystemExit):
        parse_only(kind, name, ['photo.jpg', '--output-dir', 'outputs'])
    assert 'unrecognized arguments: --output-dir' in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_only('script', 'tools/train.py', ['x.py', '--launcher', 'k8s'])
    kind, name, args = entry_point(
        ['bash', 'tools/slurm_test.sh', 'p', 'job', 'cfg.py', 'ckpt.pth',
         '--non-strict'])
    assert (name, args[:2]) == ('tools/test.py', ['cfg.py', 'ckpt.pth'])
    assert parse_only(kind, name, args).non_strict
    with pytest.raises(ValueError):
        entry_point(['python', 'run_exported.py', 'model.onnx', 'a.jpg'])
    with pytest.raises(ValueError):  # the GPU count is not a number
        entry_point(['bash', 'tools/dist_train.sh', 'cfg.py', 'cfg2.py'])


def test_launchers_reach_their_scripts():
    """The shell launchers map to the script and arguments their exec /
    srun lines run."""
    assert entry_point(['bash', 'tools/dist_train.sh', 'c.py', '8', '--amp'
                        ]) == ('script', 'tools/train.py',
                               ['c.py', '--launcher', 'pytorch', '--amp'])
    assert entry_point(['bash', 'tools/dist_test.sh', 'c.py', 'w.pth', '4']
                       ) == ('script', 'tools/test.py',
                             ['c.py', 'w.pth', '--launcher', 'pytorch'])
    assert entry_point(['bash', 'tools/slurm_train.sh', 'p', 'j', 'c.py',
                        'wd']) == ('script', 'tools/train.py',
                                   ['c.py', '--work-dir=wd',
                                    '--launcher=slurm'])
    assert entry_point(['bash', 'tools/dist_infer.sh', '8', 'imgs.txt',
                        '--batch-size', '4']) == (
                            'script', 'tools/infer.py',
                            ['imgs.txt', '--batch-size', '4', '--launcher',
                             'pytorch'])
    assert entry_point(['bash', 'tools/slurm_infer.sh', 'p', 'j',
                        'tools/curate_images.py', 'raw']) == (
                            'script', 'tools/curate_images.py',
                            ['raw', '--launcher=slurm'])


def test_every_tool_mention_in_a_shell_block_is_a_checked_command():
    """No command that names a tool escapes the check by its form (e.g. a
    ``python`` with options before the script)."""
    checked = {p.values[0].source for p in PROJECT_COMMANDS}
    missed = []
    for path in DOC_FILES:
        for command in shell_commands(path):
            if (re.search(r'\b(tools|demo)/\S+\.(py|sh)\b|-m sapiens_mm\b',
                          command.text)
                    and command.source not in checked):
                missed.append(repr(command))
    assert not missed, '\n'.join(missed)


def test_paths_named_in_the_docs_exist():
    """Every config, tool, demo script and test file the docs name (in code
    or prose) exists."""
    missing = []
    for path in DOC_FILES:
        text = path.read_text(encoding='utf-8')
        for m in re.finditer(
                r'(?<![\w/.])((?:configs|tools|demo|tests)/[\w./-]+\.(?:py|sh))\b',
                text):
            if not (ROOT / m.group(1)).is_file():
                line = text.count('\n', 0, m.start()) + 1
                missing.append(f'{path.relative_to(ROOT)}:{line}: '
                               f'{m.group(1)}')
    assert not missing, '\n'.join(missing)


def _slugs(path):
    """The heading anchors MyST (``myst_heading_anchors``) and GitHub give
    the headings of a Markdown page."""
    from mdit_py_plugins.anchors.index import slugify
    slugs = set()
    in_code = False
    for line in path.read_text(encoding='utf-8').splitlines():
        if line.lstrip().startswith(('```', '~~~')):
            in_code = not in_code
        m = None if in_code else re.match(r'^#{1,6} (.*)$', line)
        if m:
            slugs.add(slugify(m.group(1).strip()))
    return slugs


def test_readme_links_resolve():
    """README.md's relative links lead to files that exist, and their
    ``#anchors`` to headings of those files (the docs' own links are
    checked by the Sphinx build)."""
    readme = ROOT / 'README.md'
    text = readme.read_text(encoding='utf-8')
    bad = []
    links = re.findall(r'\]\(([^)\s]+)\)', text)
    relative = [u for u in links if not re.match(r'^[a-z]+:', u)]
    assert any(u.startswith('docs/') for u in relative)
    for url in relative:
        target, _, anchor = url.partition('#')
        file = (readme.parent / target) if target else readme
        if not file.exists():
            bad.append(f'{url}: no {target}')
        elif anchor and file.suffix == '.md' and anchor not in _slugs(file):
            bad.append(f'{url}: no heading #{anchor} in {target}')
    assert not bad, '\n'.join(bad)


def test_fenced_blocks_are_read_as_written(tmp_path, monkeypatch):
    """The extractor joins continuation lines, drops comments and
    environment assignments, and skips MyST directives."""
    page = tmp_path / 'page.md'
    page.write_text('text\n\n```bash\n# a comment\nNNODES=2 PORT=1 bash '
                    'tools/dist_train.sh a.py 8 \\\n    --amp  # trailing\n'
                    '```\n\n```{toctree}\nget_started\n```\n')
    import doc_commands
    blocks = list(fenced_blocks(page))
    assert [b[0] for b in blocks] == ['bash']
    monkeypatch.setattr(doc_commands, 'ROOT', tmp_path)
    (command, ) = list(shell_commands(page))
    assert command.argv == ['bash', 'tools/dist_train.sh', 'a.py', '8',
                            '--amp']
    assert command.source == 'page.md:5'


#: Documented commands that start a bare ``python`` on purpose, and why.
BARE_PYTHON = {
    'tools/deploy/run_exported.py':
    'the standalone runner is copied to machines without the project',
}


def test_python_commands_run_without_an_activated_environment():
    """Every documented command of this project starts the project's
    interpreter by its path (``.venv/bin/python``), so it runs as printed
    whether or not the reader activated the environment; ``make`` targets
    set it up themselves."""
    bare = []
    for command in COMMANDS:
        head = command.argv[0]
        if head in ('python', 'python3') and not any(
                script in command.text for script in BARE_PYTHON):
            bare.append(repr(command))
    assert not bare, '\n'.join(bare)


def test_readme_quick_start_is_the_executed_one():
    """README's tiny-model quick start is the get-started page's (which
    tests/docs/test_get_started.py runs as written): the same commands, in
    order."""
    from doc_commands import section_commands
    readme = [c.text for c in section_commands(ROOT / 'README.md',
                                               'Quick start')
              if 'quick_seg' in c.text or 'synthetic' in c.text]
    page = [c.text for c in section_commands(
        ROOT / 'docs/get_started.md', 'Quick start on a tiny model')]
    assert readme and all(text in page for text in readme), (readme, page)
    assert [page.index(text) for text in readme] == sorted(
        page.index(text) for text in readme)
