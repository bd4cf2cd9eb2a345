"""Package layout: no import cycle between ``apis`` and ``deploy``, the
public entry points import from a fresh interpreter, and no private name
is imported across modules."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _fresh(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, '-c', code], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize('first,second', [
    ('sapiens_mm.deploy', 'sapiens_mm.apis'),
    ('sapiens_mm.apis', 'sapiens_mm.deploy'),
    ('sapiens_mm.deploy.export', 'sapiens_mm.apis.inferencers'),
    ('sapiens_mm.apis.inferencers', 'sapiens_mm.deploy.runtime'),
])
@pytest.mark.slow
def test_apis_and_deploy_import_in_either_order(first, second):
    """Each order in a fresh interpreter, and ``apis`` alone does not pull
    in ``deploy`` (the inferencers load exported models lazily)."""
    proc = _fresh(f'import sys, importlib\n'
                  f'importlib.import_module({first!r})\n'
                  f'if {first!r}.startswith("sapiens_mm.apis"):\n'
                  f'    print("deploy loaded:", "sapiens_mm.deploy" in '
                  f'sys.modules)\n'
                  f'importlib.import_module({second!r})\n'
                  f'from sapiens_mm.apis import SapiensInferencer, init_model\n'
                  f'from sapiens_mm.deploy import export_model\n'
                  f'print("ok")')
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith('ok')
    if first.startswith('sapiens_mm.apis'):
        assert 'deploy loaded: False' in proc.stdout


def _private_imports(path: Path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name.startswith('_') and not alias.name.startswith(
                        '__'):
                    yield f'{path.relative_to(ROOT)}:{node.lineno} imports ' \
                        f'{alias.name} from {node.module}'


def test_no_private_name_is_imported_across_modules():
    files = sorted((ROOT / 'sapiens_mm').rglob('*.py')) + sorted(
        (ROOT / 'tools').rglob('*.py'))
    found = [hit for f in files for hit in _private_imports(f)]
    assert not found, found
    # the check itself finds such an import
    probe = ROOT / 'tests' / '_layout_probe.py'
    probe.write_text('from sapiens_mm.checkpoint.loading import _resolve\n')
    try:
        assert list(_private_imports(probe))
    finally:
        probe.unlink()


def _prints_and_parsers(path: Path):
    """``print(...)`` calls, ``sys.stdout/stderr.write`` and argparse imports
    in one file."""
    tree = ast.parse(path.read_text(), str(path))
    where = path.relative_to(ROOT)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id == 'print':
                yield f'{where}:{node.lineno} calls print'
            if (isinstance(f, ast.Attribute) and f.attr == 'write'
                    and isinstance(f.value, ast.Attribute)
                    and f.value.attr in ('stdout', 'stderr')):
                yield f'{where}:{node.lineno} writes to sys.{f.value.attr}'
        names = ([a.name for a in node.names] if isinstance(
            node, ast.Import) else [node.module] if isinstance(
                node, ast.ImportFrom) else [])
        if 'argparse' in names:
            yield f'{where}:{node.lineno} imports argparse'


# The package's own command lines (``python -m sapiens_mm`` and its
# ``export`` subcommand) and their shared error handling; every other CLI
# (benchmark, demo, train, test...) lives in tools/.
PACKAGE_CLIS = {'apis/infer_cli.py', 'deploy/cli.py', 'utils/cli.py'}


def test_library_code_returns_data_and_logs():
    """No module of the package prints; the benchmark's and the demo's
    command lines are in tools/, the library parts only return data."""
    pkg = ROOT / 'sapiens_mm'
    found = [
        hit for f in sorted(pkg.rglob('*.py'))
        if str(f.relative_to(pkg)) not in PACKAGE_CLIS
        for hit in _prints_and_parsers(f)
    ]
    assert not found, found
    # the scan itself finds each kind
    probe = ROOT / 'tests' / '_layout_print_probe.py'
    probe.write_text('import argparse\nimport sys\nprint(1)\n'
                     'sys.stderr.write("x")\n')
    try:
        assert len(list(_prints_and_parsers(probe))) == 3
    finally:
        probe.unlink()
