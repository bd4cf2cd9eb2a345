"""Package layout: the layers and their import direction, no import cycle
between ``apis`` and ``deploy``, the
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
    """Each order in a fresh interpreter. The front end reads exported models
    through the runtime below it, and does not pull in the exporter above
    it (which builds models with the front end's init_model)."""
    proc = _fresh(f'import sys, importlib\n'
                  f'importlib.import_module({first!r})\n'
                  f'if {first!r}.startswith("sapiens_mm.apis"):\n'
                  f'    print("exporter loaded:", "sapiens_mm.deploy.export" '
                  f'in sys.modules)\n'
                  f'importlib.import_module({second!r})\n'
                  f'from sapiens_mm.apis import SapiensInferencer, init_model\n'
                  f'from sapiens_mm.deploy import export_model\n'
                  f'print("ok")')
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().endswith('ok')
    if first.startswith('sapiens_mm.apis'):
        assert 'exporter loaded: False' in proc.stdout


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
PACKAGE_CLIS = {'cli/infer.py', 'cli/deploy.py', 'cli/common.py'}


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


# ------------------------------------------------------------------ layers
#: The package's layers, lowest first. A module imports (at module level)
#: only from its own layer or lower ones; function-level imports are not
#: edges of the import graph at import time and are not checked. The keys
#: are module prefixes below ``sapiens_mm.``; the longest match wins.
LAYERS = {
    'tasks': 0, 'version': 0, 'utils': 0,
    'checkpoint': 1, 'codecs': 1,
    'datasets': 2, 'detection': 2, 'tracking': 2,
    'models': 3, 'evaluation': 3, 'visualization': 3,
    'engine': 4,
    'zoo': 5,
    'deploy': 6,
    'apis': 7,
    'deploy.export': 8, 'analysis': 8,
    'cli': 9, 'demo': 9,
}


def _layer(module: str) -> int:
    """Layer of ``sapiens_mm.<module>``; the package root is exempt (it
    registers everything)."""
    best = None
    for prefix in LAYERS:
        if module == prefix or module.startswith(prefix + '.'):
            if best is None or len(prefix) > len(best):
                best = prefix
    assert best is not None, f'sapiens_mm.{module} has no layer in LAYERS'
    return LAYERS[best]


def _module_level_imports(path: Path, module: str, is_package: bool):
    """``(lineno, imported module)`` of the imports that run when the module
    is imported (not those inside functions)."""
    tree = ast.parse(path.read_text(), str(path))

    def visit(node):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(child, ast.ImportFrom):
                if child.level:
                    base = module.split('.')
                    if not is_package:
                        base = base[:-1]
                    base = base[:len(base) - (child.level - 1)]
                    target = '.'.join(base + ([child.module]
                                              if child.module else []))
                else:
                    target = child.module or ''
                yield child.lineno, target
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    yield child.lineno, alias.name
            yield from visit(child)

    yield from visit(tree)


def _layer_violations(pkg: Path):
    for path in sorted(pkg.rglob('*.py')):
        rel = path.relative_to(pkg.parent).with_suffix('')
        is_package = rel.name == '__init__'
        module = '.'.join(rel.parts[:-1] if is_package else rel.parts)
        if module in ('sapiens_mm', 'sapiens_mm.__main__'):
            continue
        own = _layer(module[len('sapiens_mm.'):])
        for lineno, target in _module_level_imports(path, module,
                                                    is_package):
            if not target.startswith('sapiens_mm.'):
                continue
            other = _layer(target[len('sapiens_mm.'):])
            if other > own:
                yield (f'{path.relative_to(pkg.parent)}:{lineno} imports {target} '
                       f'(layer {other}) from layer {own}')


def test_no_module_level_import_from_a_higher_layer(tmp_path):
    found = list(_layer_violations(ROOT / 'sapiens_mm'))
    assert not found, found
    # the scan finds an upward import (checkpoint -> apis) and ignores the
    # same import inside a function
    pkg = tmp_path / 'sapiens_mm'
    (pkg / 'checkpoint').mkdir(parents=True)
    (pkg / '__init__.py').write_text('')
    (pkg / 'checkpoint' / '__init__.py').write_text(
        'from sapiens_mm.apis import init_model\n')
    (pkg / 'checkpoint' / 'lazy.py').write_text(
        'def f():\n    from ..apis import init_model\n')
    found = [hit.split(' imports ')[1] for hit in _layer_violations(pkg)]
    assert found == ['sapiens_mm.apis (layer 7) from layer 1']


#: Every task name, to find restated task lists.
TASK_NAMES = {'pose', 'seg', 'depth', 'normal', 'pointmap', 'albedo'}


def _task_lists(path: Path):
    """Tuple / list / set literals (``Literal[...]`` included) naming three
    or more tasks: a restated task vocabulary."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            names = {
                e.value for e in node.elts
                if isinstance(e, ast.Constant) and e.value in TASK_NAMES
            }
            if len(names) >= 3:
                yield f'{path.relative_to(ROOT)}:{node.lineno}'


def test_one_task_vocabulary():
    """The task names are listed once, in sapiens_mm/tasks.py."""
    pkg = ROOT / 'sapiens_mm'
    found = [
        hit for f in sorted(pkg.rglob('*.py')) if f.name != 'tasks.py'
        for hit in _task_lists(f)
    ]
    assert not found, found
    assert list(_task_lists(pkg / 'tasks.py'))  # the scan finds the home


def _catch_warnings_scopes(tree) -> set:
    """The nodes inside a ``with warnings.catch_warnings():`` block (the
    filters are restored when it ends)."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and any(
                isinstance(item.context_expr, ast.Call)
                and isinstance(item.context_expr.func, ast.Attribute)
                and item.context_expr.func.attr == 'catch_warnings'
                for item in node.items):
            for stmt in node.body:
                inside.update(ast.walk(stmt))
    return inside


def _process_state_changes(path: Path):
    """Calls that change process-wide state: warnings filters (outside a
    ``warnings.catch_warnings()`` block), torch thread counts, mmengine's
    private instance registries, malloc settings (``mallopt``,
    :func:`keep_freed_memory`), torch's global allowlist of unpickling
    globals, environment variables, other libraries' file backends and
    checkpoint loaders replaced (``force=True``)."""
    tree = ast.parse(path.read_text(), str(path))
    where = path.relative_to(ROOT)
    banned = {('warnings', 'filterwarnings'), ('warnings', 'simplefilter'),
              ('torch', 'set_num_threads'),
              ('torch', 'set_num_interop_threads')}
    scoped = _catch_warnings_scopes(tree)
    banned_anywhere = {'add_safe_globals', 'mallopt', 'set_flush_denormal',
                       'basicConfig'}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.value is not None and \
                getattr(node.value, 'id', None) == 'warnings' and \
                node in scoped:
            continue
        if isinstance(node, ast.Attribute):
            if node.attr == '_instance_dict':
                yield f'{where}:{node.lineno} touches _instance_dict'
            if isinstance(node.value, ast.Name) and (
                    node.value.id, node.attr) in banned:
                yield f'{where}:{node.lineno} calls {node.value.id}.' \
                      f'{node.attr}'
            if node.attr in banned_anywhere:
                yield f'{where}:{node.lineno} calls {node.attr}'
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else \
                getattr(func, 'id', '')
            if name == 'keep_freed_memory':
                yield f'{where}:{node.lineno} calls keep_freed_memory'
            if name in ('register_backend', 'register_scheme') and any(
                    k.arg == 'force' and isinstance(k.value, ast.Constant)
                    and k.value.value is True for k in node.keywords):
                yield f'{where}:{node.lineno} calls {name}(force=True)'
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [
                node.target]
            for t in targets:
                if isinstance(t, ast.Subscript) and ast.unparse(
                        t.value) == 'os.environ':
                    yield f'{where}:{node.lineno} writes os.environ'


# (file, call) -> why library code may make it
PROCESS_STATE_HOMES = {
    ('sapiens_mm/utils/cpu_allocator.py', 'mallopt'):
    'the home of keep_freed_memory, which only whole programs call',
    ('sapiens_mm/zoo/loader.py', 'register_scheme(force=True)'):
    'safe_checkpoint_loading: scoped, the previous loader is restored on '
    'exit',
}


def test_library_code_leaves_process_state_alone():
    """Warnings filters, thread counts, malloc, torch's unpickling
    allowlist, the environment and other libraries' registrations belong
    to the application: the command lines (sapiens_mm/cli) and tools/, not
    library code."""
    pkg = ROOT / 'sapiens_mm'
    found = [
        hit for f in sorted(pkg.rglob('*.py'))
        if f.relative_to(pkg).parts[0] != 'cli'
        for hit in _process_state_changes(f)
        if (str(f.relative_to(ROOT)), hit.split(' calls ')[-1])
        not in PROCESS_STATE_HOMES
    ]
    assert not found, found
    probe = ROOT / 'tests' / '_layout_state_probe.py'
    probe.write_text('import torch, warnings\ntorch.set_num_threads(1)\n'
                     'warnings.filterwarnings("ignore")\n'
                     'with warnings.catch_warnings():\n'
                     '    warnings.filterwarnings("ignore")  # scoped\n'
                     'torch.serialization.add_safe_globals([])\n'
                     'keep_freed_memory()\nos.environ["A"] = "1"\n'
                     'CheckpointLoader.register_scheme("", force=True)\n')
    try:
        assert len(list(_process_state_changes(probe))) == 6
    finally:
        probe.unlink()
