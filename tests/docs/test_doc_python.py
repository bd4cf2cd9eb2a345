"""The Python examples of README.md and docs/ fit the code: each compiles,
and each call of a sapiens_mm function, class or inferencer instance in them
passes arguments that the callee accepts (a renamed keyword argument fails
here, without running the example, which would need the official
checkpoints)."""
import ast
import importlib
import inspect

import pytest

from doc_commands import python_blocks

BLOCKS = list(python_blocks())

#: mmengine's BaseInferencer takes ``**kwargs`` in ``__call__`` and accepts
#: those named in these class attributes (and refuses any other).
INFERENCER_KWARG_SETS = ('preprocess_kwargs', 'forward_kwargs',
                         'visualize_kwargs', 'postprocess_kwargs')


def _resolve(dotted: str):
    parts = dotted.split('.')
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module('.'.join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise LookupError(dotted)


def _dotted(node):
    """``a.b.c`` of a Name / Attribute chain, else None."""
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return '.'.join([node.id] + names[::-1])
    return None


def call_problems(code: str):
    """What is wrong with the sapiens_mm calls of ``code``: one line per
    call whose arguments the callee does not accept."""
    return analyse(code)[1]


def analyse(code: str):
    """``(number of sapiens_mm calls checked, problems)`` of ``code``."""
    tree = ast.parse(code)
    known = {}  # local name -> sapiens_mm object
    instances = {}  # local name -> class it was made from
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or '').startswith(
                'sapiens_mm'):
            for alias in node.names:
                known[alias.asname or alias.name] = _resolve(
                    f'{node.module}.{alias.name}')
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith('sapiens_mm'):
                    known[alias.asname or alias.name.split('.')[0]] = \
                        importlib.import_module(alias.name.split('.')[0])
    # assignments in source order: `x = SomeClass(...)`
    for node in sorted((n for n in ast.walk(tree) if isinstance(n, ast.Assign)),
                       key=lambda n: n.lineno):
        call = node.value
        if isinstance(call, ast.Call):
            func = _callee(call.func, known, instances)
            if inspect.isclass(func):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        instances[target.id] = func
    checked = 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = _callee(node.func, known, instances)
        if func is None:
            continue
        checked += 1
        problem = _check_call(func, node)
        if problem:
            problems.append(f'line {node.lineno}: {ast.unparse(node)[:80]}: '
                            f'{problem}')
    return checked, problems


def _callee(func_node, known, instances):
    dotted = _dotted(func_node)
    if dotted is None:
        return None
    head, _, rest = dotted.partition('.')
    if head in instances:
        cls = instances[head]
        return _InstanceCall(cls, rest or '__call__')
    if head in known:
        obj = known[head]
        for attr in rest.split('.') if rest else []:
            obj = getattr(obj, attr)
        return obj if callable(obj) else None
    return None


class _InstanceCall:
    """Calling the method ``name`` of an instance of ``cls`` (``__call__``:
    the instance itself)."""

    def __init__(self, cls, name):
        self.cls = cls
        self.name = name


def _check_call(func, node):
    kwargs = [k.arg for k in node.keywords if k.arg is not None]
    n_args = len(node.args)
    if any(isinstance(a, ast.Starred) for a in node.args):
        return None
    if isinstance(func, _InstanceCall):
        cls = func.cls
        method = getattr(cls, func.name)
        signature = inspect.signature(method)
        params = list(signature.parameters.values())
        if not isinstance(inspect.getattr_static(cls, func.name),
                          (staticmethod, classmethod)):
            params = params[1:]  # self
        extra = set()
        for name in INFERENCER_KWARG_SETS:
            extra |= set(getattr(cls, name, ()) or ())
        if func.name == '__call__' and extra:
            # a BaseInferencer: **kwargs limited to those sets
            named = {p.name for p in params}
            unknown = [k for k in kwargs if k not in named | extra]
            if unknown:
                return f'{cls.__name__}() does not take {unknown}'
            return None
        signature = signature.replace(parameters=params)
    else:
        try:
            signature = inspect.signature(func)
        except (TypeError, ValueError):
            return None
    try:
        signature.bind_partial(*([None] * n_args),
                               **{k: None for k in kwargs})
    except TypeError as e:
        return str(e)
    return None


def test_the_docs_have_python_examples():
    """The examples are found and their sapiens_mm calls recognised (else
    the checks below pass vacuously)."""
    assert len(BLOCKS) >= 10
    assert sum(analyse(code)[0] for _, code in BLOCKS) >= 20


@pytest.mark.parametrize('source,code', BLOCKS, ids=[s for s, _ in BLOCKS])
def test_python_example_fits_the_code(source, code):
    compile(code, source, 'exec')
    problems = call_problems(code)
    assert not problems, f'{source}:\n' + '\n'.join(problems)


def test_call_check_finds_wrong_arguments():
    """Renamed keywords, too many positional arguments and unknown
    inferencer call options are found; correct calls are not."""
    good = ("from sapiens_mm.apis import PoseInferencer, init_model\n"
            "pose = PoseInferencer('x.pth', detector='none')\n"
            "pose('a.jpg', bboxes=None, return_vis=True)\n"
            "init_model('c.py', 'w.pth', device='cpu')\n")
    assert call_problems(good) == []
    bad = ("from sapiens_mm.apis import PoseInferencer, init_model\n"
           "import sapiens_mm\n"
           "pose = PoseInferencer('x.pth', det_config_file='d.py')\n"
           "pose('a.jpg', box_list=None)\n"
           "pose.preprocess('a.jpg', 1, 2, 3, 4, 5)\n"
           "init_model('c.py', 'w.pth', 'cpu', None, 'extra')\n"
           "sapiens_mm.get_config(config_name='x')\n")
    problems = call_problems(bad)
    assert len(problems) == 5, problems
    for word in ('det_config_file', 'box_list', 'preprocess',
                 "init_model('c.py', 'w.pth', 'cpu', None, 'extra')",
                 'config_name'):
        assert any(word in line for line in problems), (word, problems)
