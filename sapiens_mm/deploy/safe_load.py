"""Reading exported models (``.onnx`` / ``.pt2``) without running code from
them.

An exported model is a file users download. Two things in such a file could
run code when it is opened naively:

* the model config stored in its metadata. Version 1 of the metadata stored
  the config as Python text, and ``Config.fromstring(text, '.py')`` executes
  it. The config is now stored as pure data and rebuilt executing nothing
  (:func:`config_to_data` / :func:`config_from_data`, from
  :mod:`sapiens_mm.checkpoint.config_data`, which checkpoints use too).
* a ``.pt2`` archive. torch's loader unpickles a weight or constant flagged
  ``use_pickle`` (and legacy ``*.pt`` weight files, and "opaque"
  constants) with full pickle, hands the symbolic sizes of the graph to
  ``sympy.sympify``, compiles the archive's ``guards_code`` with ``exec``
  when ``.module()`` is called, writes the names of the graph's values and
  inputs into the Python source of the module it generates, imports the
  modules a pytree spec names (``__enum__`` contexts, ``defaultdict``
  factories) and retries the sample inputs with ``weights_only=False``.
  :func:`check_pt2_archive` reads the archive's zip directory and JSON
  first and refuses, before torch touches the file, anything in those
  fields that is not what a model export writes.
"""
import ast
import collections
import io
import json
import re
import zipfile
from typing import Any, BinaryIO, Iterator, Optional, Set, Tuple

from sapiens_mm.checkpoint.config_data import (UnsafeModelError,
                                               config_from_data,
                                               config_to_data)

__all__ = [
    'UnsafeModelError', 'config_to_data', 'config_from_data',
    'check_pt2_archive', 'check_size_expression', 'check_graph_target',
    'check_guard_expression', 'check_treespec'
]

# --------------------------------------------------------------------- pt2
#: Entries (relative to the archive root) that torch reads as data.
_PT2_DATA = re.compile(
    r'^(archive_format|archive_version|byteorder|\.data/version|'
    r'\.data/serialization_id|models/[^/]+\.json|extra/[^/]+|'
    r'data/weights/weight_\d+|data/constants/tensor_\d+|'
    r'data/weights/[^/]+_weights_config\.json|'
    r'data/constants/[^/]+_constants_config\.json)\Z')
_PT2_SAMPLE_INPUTS = re.compile(r'^data/sample_inputs/[^/]+\.pt\Z')


def check_pt2_archive(path: str, file: Optional[BinaryIO] = None) -> None:
    """Refuse a ``.pt2`` archive that would make ``torch.export.load``
    unpickle anything or evaluate code in its graph.

    Reads only the zip directory, the graph and payload configs (JSON) and
    the sample inputs (with ``torch.load(weights_only=True)``); nothing is
    executed. This is a second line of defence: only archives in the trust
    store are loaded at all (:mod:`sapiens_mm.deploy.trust`), since a graph
    that passes these checks still runs whatever operators it names.

    Args:
        path: A ``.pt2`` file (named in messages).
        file: The open file to read instead of ``path`` (the one whose
            digest was checked).

    Raises:
        UnsafeModelError: Not a zip archive, an entry torch would unpickle
            (a weight or constant with ``use_pickle``, a legacy ``*.pt``
            weights / constants file, a custom or opaque object), sample
            inputs that need more than ``weights_only=True`` or hold more
            than tensors and numbers under Python names, a symbolic size
            expression that is not arithmetic on size symbols
            (:func:`check_size_expression`), a guard that is not a
            comparison of input sizes (:func:`check_guard_expression`),
            an operator a model export never calls
            (:func:`check_graph_target`), a value or input name that is
            not a Python name, a pytree spec of other than tuples, lists
            and dicts, or any entry this check does not know.
    """
    try:
        archive = zipfile.ZipFile(path if file is None else file)
    except (zipfile.BadZipFile, OSError) as e:
        raise UnsafeModelError(
            f'{path} is not a torch.export (.pt2) archive ({e}).') from None
    with archive:
        names = archive.namelist()
        roots = {n.split('/', 1)[0] for n in names}
        if len(roots) != 1 or any('/' not in n for n in names):
            raise UnsafeModelError(
                f'{path} is not a torch.export (.pt2) archive: its entries '
                'do not share one root folder.')
        for name in names:
            rel = name.split('/', 1)[1]
            if rel == '' or rel.endswith('/'):
                continue
            if _PT2_SAMPLE_INPUTS.match(rel):
                _check_sample_inputs(path, name, archive.read(name))
                continue
            if not _PT2_DATA.match(rel):
                raise UnsafeModelError(
                    f'Refused {path}: its entry {rel!r} is not plain data '
                    'that torch.export.load reads safely (pickled weights, '
                    'objects or compiled code). sapiens_mm writes no such '
                    'entry; re-export the model with tools/deploy/export.py.')
            if rel.endswith('_config.json'):
                _check_payload_config(path, rel, archive.read(name))
            elif rel.startswith('models/'):
                _check_graph(path, rel, archive.read(name))


def _check_payload_config(path: str, rel: str, raw: bytes) -> None:
    try:
        config = json.loads(raw).get('config')
        entries = dict(config)
    except (ValueError, AttributeError, TypeError):
        raise UnsafeModelError(
            f'Refused {path}: {rel} is not a valid payload config.') from None
    for fqn, meta in entries.items():
        if not isinstance(meta, dict) or meta.get('use_pickle', False) or \
                not re.match(r'^(weight|tensor)_\d+\Z',
                             str(meta.get('path_name'))):
            raise UnsafeModelError(
                f'Refused {path}: {fqn!r} in {rel} is stored as a pickle '
                '(use_pickle), which torch.export.load unpickles with '
                'weights_only=False and which can run arbitrary code. '
                'sapiens_mm never exports pickled weights; re-export the '
                'model with tools/deploy/export.py.')
    _refuse_program_problems(path, rel, config)


def _check_sample_inputs(path: str, name: str, raw: bytes) -> None:
    import torch
    try:
        inputs = torch.load(io.BytesIO(raw), weights_only=True)
    except Exception as e:  # noqa: BLE001 (any failure means: refuse)
        raise UnsafeModelError(
            f'Refused {path}: its sample inputs ({name}) need more than '
            'tensors to load (torch.export.load would retry them with '
            f'weights_only=False): {str(e).splitlines()[0]}') from None
    why = _sample_inputs_problem(inputs)
    if why is not None:
        raise UnsafeModelError(
            f'Refused {path}: its sample inputs ({name}) hold {why}; '
            '.module() writes their keys into the Python code it compiles. '
            'sapiens_mm exports tensors only; re-export the model with '
            'tools/deploy/export.py.')


def _sample_inputs_problem(inputs: Any) -> Optional[str]:
    """What in loaded sample inputs is not tensors and numbers in tuples,
    lists and dicts keyed by Python names, or None."""
    import torch
    todo = [inputs]
    while todo:
        item = todo.pop()
        if isinstance(item, (tuple, list)):
            todo.extend(item)
        elif isinstance(item, dict):
            for key, value in item.items():
                if not isinstance(key, str) or not key.isidentifier():
                    return f'the key {str(key)[:40]!r} (not a Python name)'
                todo.append(value)
        elif not isinstance(item, (torch.Tensor, int, float, type(None))):
            return f'a {type(item).__name__}'
    return None


#: Names a symbolic size expression of an exported graph may use: sympy's
#: ``srepr`` constructors and assumptions, and the size functions torch's
#: deserializer hands to ``sympy.sympify`` (no powers).
_SIZE_NAMES = frozenset({
    'Symbol', 'Integer', 'Rational', 'Add', 'Mul', 'Max', 'Min', 'Abs',
    'Eq', 'Ne', 'Lt', 'Le', 'Gt', 'Ge', 'Equality', 'Unequality',
    'StrictLessThan', 'LessThan', 'StrictGreaterThan', 'GreaterThan', 'And',
    'Or', 'Not', 'true', 'false', 'True', 'False', 'BooleanTrue',
    'BooleanFalse', 'FloorDiv', 'ModularIndexing', 'Where', 'PythonMod',
    'Mod', 'CleanDiv', 'CeilToInt', 'FloorToInt', 'CeilDiv', 'FloatTrueDiv',
    'IntTrueDiv', 'TruncToFloat', 'TruncToInt', 'RoundToInt', 'ToFloat',
    'Identity', 'positive', 'negative', 'nonnegative', 'nonpositive',
    'integer', 'real', 'finite', 'zero', 'nonzero', 'even', 'odd',
    'rational', 'commutative'
})
_SIZE_TOKEN = re.compile(r"""\s+|'[a-z]{1,3}\d+'|"[a-z]{1,3}\d+"|"""
                         r'\d{1,20}(?!\d)|[A-Za-z_][A-Za-z0-9_]*|'
                         r'[-+*/%(),<>=!]')
_SIZE_SYMBOL = re.compile(r'^[a-z]{1,3}\d+\Z')  # s0, u3, s77...
_SIZE_MAX_CHARS = 4000


def check_size_expression(text: Any) -> Optional[str]:
    """Why a symbolic size expression of an exported graph is not plain
    arithmetic on sizes, or None.

    ``torch.export.load`` passes each ``expr_str`` of the graph to
    ``sympy.sympify``, which evaluates Python. Accepted: sympy's ``srepr``
    of size arithmetic (``Mul(Integer(2), Symbol('s77', positive=True,
    integer=True))``) or its plain form (``2*s77``): integers, quoted or
    bare size symbols (``s0``, ``u1``...), ``+ - * / // %``, comparisons,
    parentheses, commas, keyword ``=`` and the names in ``_SIZE_NAMES``.
    There is no attribute access, other string, bracket or power, so
    nothing else can be reached.
    """
    if not isinstance(text, str):
        return f'{type(text).__name__}, not text'
    if len(text) > _SIZE_MAX_CHARS:
        return f'{len(text)} characters long'
    if '**' in text:
        return 'a power (not a size)'
    pos = 0
    while pos < len(text):
        m = _SIZE_TOKEN.match(text, pos)
        if m is None:
            return f'character {text[pos]!r} at {pos}'
        token = m.group()
        if token[0].isalpha() or token[0] == '_':
            if token not in _SIZE_NAMES and not _SIZE_SYMBOL.match(token):
                return f'name {token!r}'
        pos = m.end()
    return None


#: Non-ATen call targets an exported graph may have: the symbolic-size
#: arithmetic torch serializes (``_operator.add``, ``torch.sym_max``...).
_SYM_TARGETS = frozenset(
    [f'_operator.{n}' for n in ('eq', 'ne', 'le', 'ge', 'lt', 'gt', 'neg',
                                'pos', 'mul', 'add', 'sub', 'floordiv',
                                'mod', 'truediv', 'and_', 'or_', 'getitem')]
    + ['math.trunc'] + [f'torch.sym_{n}' for n in ('not', 'int', 'float',
                                                    'ite', 'max', 'min',
                                                    'sqrt')])
#: ATen operators that read or write files, or make a tensor share
#: another's memory.
_DENIED_OPS = frozenset({'from_file', 'save', 'set_', 'set_data'})
_ATEN_TARGET = re.compile(
    r'^torch\.ops\.aten\.([a-z_][a-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)\Z')


def _aten_schema(target: str):
    """The schema of an ATen operator target (None if there is none)."""
    import torch
    m = _ATEN_TARGET.match(target)
    try:
        return getattr(getattr(torch.ops.aten, m[1]), m[2])._schema
    except (AttributeError, RuntimeError, TypeError):
        return None


def check_graph_target(target: Any) -> Optional[str]:
    """Why an operator an exported graph calls is not one a model export
    needs, or None.

    Accepted: the symbolic-size arithmetic torch serializes and ATen
    operators, except those that read or write files (``aten.from_file``,
    ``aten.save``) or make a tensor share another's memory
    (``aten.set_``). Everything else is refused: other ``torch.*``
    callables (``torch.save``...), custom and higher-order operators.
    In-place operators are checked per graph (:func:`_graph_problems`):
    they may write only tensors the graph computed itself.
    """
    if target in _SYM_TARGETS:
        return None
    m = _ATEN_TARGET.match(target) if isinstance(target, str) else None
    if m is None:
        return 'not an ATen operator'
    if m[1] in _DENIED_OPS:
        return 'it reads or writes files or re-points memory'
    if _aten_schema(target) is None:
        return 'no such ATen operator'
    return None


def _tensor_names(arg: Any) -> Set[str]:
    """Names of the tensors a serialized argument refers to."""
    names: Set[str] = set()
    todo = [arg]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            for k, v in item.items():
                if k.startswith(('as_tensor', 'as_optional_tensor')) and \
                        isinstance(v, dict) and isinstance(v.get('name'),
                                                           str):
                    names.add(v['name'])
                else:
                    todo.append(v)
        elif isinstance(item, list):
            todo.extend(item)
    return names


def _node_problem(node: dict, external: Set[str]) -> Optional[str]:
    """Why a graph node is refused, or None; ``external`` (the names of the
    graph's inputs, weights and buffers and of the views of them) grows by
    the node's outputs that alias it."""
    why = check_graph_target(node['target'])
    if why is not None or node['target'] in _SYM_TARGETS:
        return why
    schema = _aten_schema(node['target'])
    args = {i.get('name'): i.get('arg') for i in node['inputs']
            if isinstance(i, dict)}
    used = set().union(*[_tensor_names(v) for v in args.values()])
    written = set().union(*[
        _tensor_names(args.get(a.name)) for a in schema.arguments
        if a.alias_info is not None and a.alias_info.is_write
    ])
    if written & external:
        return ('it writes into the model\'s input, weights or buffers '
                '(only tensors the graph computes may be written in place)')
    if used & external and any(r.alias_info is not None
                               for r in schema.returns):
        external |= _tensor_names(node.get('outputs'))
    return None


#: A name torch writes into the Python source of the module it generates
#: (values, inputs, parameter paths, pytree keys, registry names): words
#: and dots only, or empty (the root module's path).
_NAME = re.compile(
    r'^(?:[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)?\Z')
#: String arguments of operators (``as_string``): printable ASCII without
#: quotes or backslashes, so nothing can close the quotes they are
#: printed in (a string input becomes ``x == '<value>'`` in a guard).
_ARG_TEXT = re.compile(r'^[ !#-&(-\[\]-~]*\Z')
#: Fields torch keeps as text and never turns into code or imports (the
#: nodes' stack traces and module paths, the version that wrote the file).
_TEXT_FIELDS = frozenset({'metadata', 'torch_version'})
#: Pytree containers a spec may name; others import modules by name
#: (``defaultdict`` factories) or need registered classes.
_TREESPEC_TYPES = frozenset({
    None, 'builtins.tuple', 'builtins.list', 'builtins.dict',
    'collections.OrderedDict', 'torch.fx.immutable_collections.'
    'immutable_list', 'torch.fx.immutable_collections.immutable_dict'
})


def check_treespec(text: Any) -> Optional[str]:
    """Why a serialized pytree spec (``in_spec`` / ``out_spec`` of a
    graph's call signature) is not plain containers, or None.

    torch rebuilds a spec by type name and decodes each container's
    ``context`` with a JSON hook that imports the module an ``__enum__``
    object names; a ``defaultdict`` context imports its factory's module.
    Accepted: leaves, tuples, lists and dicts (plain, ordered, torch's
    immutable ones) whose context is null or a list of Python names and
    integers (dict keys).
    """
    try:
        protocol, spec = json.loads(text)
    except (TypeError, ValueError):
        return 'not a serialized pytree spec'
    if protocol != 1:
        return f'pytree protocol {protocol!r}'
    todo = [spec]
    while todo:
        node = todo.pop()
        if not isinstance(node, dict) or \
                set(node) != {'type', 'context', 'children_spec'} or \
                not isinstance(node['children_spec'], list):
            return 'not a pytree spec node'
        if node['type'] not in _TREESPEC_TYPES:
            return f'the container type {str(node["type"])[:60]!r}'
        context = node['context']
        if context is not None:
            try:
                keys = json.loads(context)  # plain JSON: no hook, no import
            except (TypeError, ValueError):
                return 'a context that is not JSON'
            if keys is not None and not (isinstance(keys, list) and all(
                    isinstance(k, int) and not isinstance(k, bool)
                    or isinstance(k, str) and k.isidentifier()
                    for k in keys)):
                return f'the context {str(context)[:60]!r}'
        todo.extend(node['children_spec'])
    return None


#: Operators, functions and methods of a guard (what torch's Python
#: printer writes for size arithmetic and comparisons).
_GUARD_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod,
              ast.USub, ast.UAdd, ast.Not, ast.And, ast.Or, ast.Eq,
              ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_GUARD_FUNCTIONS = frozenset({'max', 'min', 'abs'})
_GUARD_MATH = frozenset({'floor', 'ceil', 'trunc'})
_GUARD_METHODS = frozenset({'size', 'stride', 'storage_offset', 'dim',
                            'numel'})


def check_guard_expression(text: Any) -> Optional[str]:
    """Why a guard of an exported program (``guards_code``) is not a
    comparison of input sizes, or None.

    ``ExportedProgram.module()`` pastes each guard into Python source that
    it compiles with ``exec`` (a line break in a guard starts a statement
    of its own, run there and then). Accepted: one expression of integers,
    ``+ - * / // %``, comparisons, ``and`` / ``or`` / ``not``, ``max`` /
    ``min`` / ``abs`` / ``math.floor`` / ``ceil`` / ``trunc``, and input
    sizes: ``L['name'][0].size()[1]`` (``L`` subscripted by Python names
    and integers, then ``.size()``, ``.stride()``, ``.storage_offset()``,
    ``.dim()`` or ``.numel()``).
    """
    if not isinstance(text, str):
        return f'{type(text).__name__}, not text'
    if len(text) > _SIZE_MAX_CHARS:
        return f'{len(text)} characters long'
    if not _ARG_TEXT.match(text.replace("'", '')):
        return 'a line break, backslash or other control character'
    try:
        tree = ast.parse(text, mode='eval')
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return 'not one Python expression'
    todo = [(tree.body, False)]  # (node, is a subscript key)
    while todo:
        node, key = todo.pop()
        if key:
            value = node.value if isinstance(node, ast.Constant) else None
            if not (isinstance(value, int) and not isinstance(value, bool)
                    or isinstance(value, str) and value.isidentifier()):
                return 'a subscript that is not a name or an integer'
        elif isinstance(node, ast.Constant):
            if not isinstance(node.value, (int, float)):
                return f'the constant {node.value!r}'
        elif isinstance(node, ast.Name):
            if node.id != 'L':
                return f'the name {node.id!r}'
        elif isinstance(node, ast.Subscript):
            todo += [(node.value, False), (node.slice, True)]
        elif isinstance(node, ast.Call):
            func = node.func
            if node.keywords:
                return 'a keyword argument'
            if isinstance(func, ast.Name) and func.id in _GUARD_FUNCTIONS:
                todo += [(a, False) for a in node.args]
            elif isinstance(func, ast.Attribute) and \
                    isinstance(func.value, ast.Name) and \
                    func.value.id == 'math' and func.attr in _GUARD_MATH:
                todo += [(a, False) for a in node.args]
            elif isinstance(func, ast.Attribute) and not node.args and \
                    func.attr in _GUARD_METHODS:
                todo.append((func.value, False))
            else:
                return f'the call {ast.unparse(func)[:40]!r}'
        elif isinstance(node, (ast.BinOp, ast.UnaryOp, ast.BoolOp,
                               ast.Compare)):
            ops = getattr(node, 'ops', None) or [node.op]
            if not all(isinstance(op, _GUARD_OPS) for op in ops):
                return f'the operator {type(ops[0]).__name__}'
            todo += [(c, False) for c in ast.iter_child_nodes(node)
                     if isinstance(c, ast.expr)]
        else:
            return f'a {type(node).__name__} expression'
    return None


def _string_problem(key: Optional[str], value: str) -> Optional[str]:
    """Why a string of a serialized program under ``key`` is refused."""
    if key in ('as_string', 'as_strings'):
        if not _ARG_TEXT.match(value):
            return 'a string argument with quotes or control characters'
    elif not _NAME.match(value):
        return 'not a Python name (torch writes it into generated code)'
    return None


def _program_problems(program: Any) -> Iterator[Tuple[str, Any, str]]:
    """``(kind, value, why)`` for every part of a serialized program (a
    ``models/*.json`` entry, or a payload config) that torch would turn into
    code or imports and that a model export never has: symbolic sizes
    (:func:`check_size_expression`), operators (:func:`check_graph_target`
    and the in-place rule), guards (:func:`check_guard_expression`), pytree
    specs (:func:`check_treespec`), names and string arguments."""
    todo = collections.deque([(program, None)])  # in file order
    while todo:
        item, key = todo.popleft()
        if isinstance(item, dict):
            if isinstance(item.get('nodes'), list):  # a graph
                external = _tensor_names(item.get('inputs'))
                for node in item['nodes']:
                    if isinstance(node, dict) and 'target' in node:
                        why = _node_problem(node, external)
                        if why is not None:
                            yield 'operator', node['target'], why
            for k, v in item.items():
                if not isinstance(k, str) or not _NAME.match(k):
                    yield 'name', k, 'not a Python name'
                elif k in _TEXT_FIELDS:
                    continue
                elif k == 'expr_str':
                    why = check_size_expression(v)
                    if why is not None:
                        yield 'symbolic size', v, why
                elif k == 'guards_code':
                    for guard in v if isinstance(v, list) else [v]:
                        why = check_guard_expression(guard)
                        if why is not None:
                            yield 'guard', guard, why
                elif k in ('in_spec', 'out_spec'):
                    why = check_treespec(v)
                    if why is not None:
                        yield 'pytree spec', v, why
                elif k in ('min_val', 'max_val'):
                    if v is not None and (not isinstance(v, int)
                                          or isinstance(v, bool)):
                        yield 'size bound', v, 'not an integer'
                elif k == 'as_operator':
                    why = check_graph_target(v)
                    if why is not None:
                        yield 'operator', v, why
                else:
                    todo.append((v, k))
        elif isinstance(item, list):
            todo.extend((v, key) for v in item)
        elif isinstance(item, str):
            why = _string_problem(key, item)
            if why is not None:
                yield 'string', item, why


def _refuse_program_problems(path: str, rel: str, program: Any) -> None:
    for kind, value, why in _program_problems(program):
        shown = value[:80] if isinstance(value, str) else value
        raise UnsafeModelError(
            f'Refused {path}: its {rel} has the {kind} {shown!r}, which a '
            f'model export never has ({why}); loading or running it could '
            'execute code or write files. sapiens_mm writes no such '
            'archive; re-export the model with tools/deploy/export.py.')


def _check_graph(path: str, rel: str, raw: bytes) -> None:
    try:
        program = json.loads(raw)
    except ValueError:
        raise UnsafeModelError(
            f'Refused {path}: its graph {rel} is not valid JSON.') from None
    _refuse_program_problems(path, f'graph ({rel})', program)
