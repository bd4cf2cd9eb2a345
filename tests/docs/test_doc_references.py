"""Every sapiens_mm object the documentation names in full exists where it
is named: ``sapiens_mm.x.y`` in code spans of README.md and docs/*.md, and
``:func:`sapiens_mm.x.y``` style cross-references in the package's
docstrings. A name that only resolves through a deprecated alias (an import
path kept for one release) counts as wrong: the docs name the new home."""
import ast
import importlib
import re
import warnings
from pathlib import Path

import pytest

from doc_commands import DOC_FILES, ROOT

#: ``sapiens_mm.a.b`` inside a Markdown code span (up to a call's
#: parenthesis, an index or a space).
CODE_SPAN_NAME = re.compile(r'`(sapiens_mm(?:\.[A-Za-z_]\w*)+)(?:\(|`|\[|\s)')
#: A Sphinx role whose target is a full sapiens_mm name.
ROLE_NAME = re.compile(
    r':(?:py:)?(?:func|class|mod|meth|attr|data|exc|obj):`~?'
    r'(sapiens_mm(?:\.\w+)+)`')


def is_deprecated_module(module) -> bool:
    """Whether importing ``module`` warns that it moved: a module-level
    ``warnings.warn(..., DeprecationWarning, ...)`` (seen in the source, so
    that a module imported earlier, whose warning has been given, counts
    too)."""
    path = getattr(module, '__file__', None)
    if not path or not path.endswith('.py'):
        return False
    tree = ast.parse(Path(path).read_text(encoding='utf-8'))
    for node in tree.body:
        call = node.value if isinstance(node, ast.Expr) else None
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and call.func.attr == 'warn' and any(
                    isinstance(a, ast.Name) and a.id == 'DeprecationWarning'
                    for a in list(call.args) + [k.value for k in call.keywords])):
            return True
    return False


def resolve(name: str):
    """The object ``name`` names: the longest importable module prefix,
    then attributes.

    Raises:
        LookupError: Nothing has that name.
        DeprecationWarning: The name resolves only through a deprecated
            alias.
    """
    parts = name.split('.')
    with warnings.catch_warnings():
        warnings.simplefilter('error', DeprecationWarning)
        for cut in range(len(parts), 0, -1):
            module_name = '.'.join(parts[:cut])
            try:
                obj = importlib.import_module(module_name)
            except ModuleNotFoundError as e:
                if e.name is not None and not module_name.startswith(e.name):
                    raise  # a real import error inside the module
                continue
            if is_deprecated_module(obj):
                raise DeprecationWarning(f'{module_name} is a deprecated '
                                         'alias of a moved module')
            for attr in parts[cut:]:
                if not hasattr(obj, attr):
                    raise LookupError(f'{module_name} has no {attr!r} '
                                      f'(looking up {name})')
                obj = getattr(obj, attr)
            return obj
    raise LookupError(f'no module for {name}')


def _doc_names():
    found = {}
    for path in DOC_FILES:
        text = path.read_text(encoding='utf-8')
        for m in CODE_SPAN_NAME.finditer(text):
            line = text.count('\n', 0, m.start()) + 1
            found.setdefault(m.group(1), f'{path.relative_to(ROOT)}:{line}')
    return found


def _docstring_names():
    found = {}
    for path in sorted((ROOT / 'sapiens_mm').rglob('*.py')):
        text = path.read_text(encoding='utf-8')
        for m in ROLE_NAME.finditer(text):
            line = text.count('\n', 0, m.start()) + 1
            found.setdefault(m.group(1), f'{path.relative_to(ROOT)}:{line}')
    return found


DOC_NAMES = _doc_names()
DOCSTRING_NAMES = _docstring_names()


def test_the_docs_name_objects():
    """The scan finds the names (else the checks below pass vacuously)."""
    assert 'sapiens_mm.apis.init_model' in DOC_NAMES
    assert len(DOC_NAMES) >= 20 and len(DOCSTRING_NAMES) >= 10


NAMES = sorted({**DOCSTRING_NAMES, **DOC_NAMES}.items())


@pytest.mark.parametrize('name,source', NAMES, ids=[n for n, _ in NAMES])
def test_named_object_exists(name, source):
    try:
        resolve(name)
    except (LookupError, DeprecationWarning) as e:
        pytest.fail(f'{source}: {name}: {e}')


def test_resolve_refuses_missing_and_deprecated_names(tmp_path, monkeypatch):
    assert resolve('sapiens_mm.apis.init_model').__name__ == 'init_model'
    with pytest.raises(LookupError):
        resolve('sapiens_mm.apis.no_such_function')
    with pytest.raises(LookupError):
        resolve('sapiens_mm.no_such_module.thing')
    # a module that exists only as a deprecated alias
    (tmp_path / 'old_home_pkg').mkdir()
    (tmp_path / 'old_home_pkg' / '__init__.py').write_text('')
    (tmp_path / 'old_home_pkg' / 'old.py').write_text(
        'import warnings\nwarnings.warn("moved", DeprecationWarning)\n'
        'thing = 1\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(DeprecationWarning):
        resolve('old_home_pkg.old.thing')
    # ... also once it has been imported (its warning already given)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        importlib.import_module('old_home_pkg.old')
    with pytest.raises(DeprecationWarning):
        resolve('old_home_pkg.old.thing')
