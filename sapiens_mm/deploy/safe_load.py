"""Reading exported models (``.onnx`` / ``.pt2``) without running code from
them.

An exported model is a file users download. Two things in such a file could
run code when it is opened naively:

* the model config stored in its metadata. Version 1 of the metadata stored
  the config as Python text, and ``Config.fromstring(text, '.py')`` executes
  it. The config is now stored as pure data and rebuilt executing nothing
  (:func:`config_to_data` / :func:`config_from_data`, from
  :mod:`sapiens_mm.checkpoint.config_data`, which checkpoints use too).
* the weights of a ``.pt2`` archive. torch's archive loader unpickles a
  weight or constant flagged ``use_pickle`` (and legacy ``*.pt`` weight
  files, and "opaque" constants) with full pickle, i.e. it can run any
  ``__reduce__``. :func:`check_pt2_archive` reads the archive's zip
  directory and JSON configs first and refuses such entries before torch
  touches the file; the sample inputs (a ``torch.save`` file torch would
  retry with ``weights_only=False`` on failure) must load with
  ``weights_only=True``.
"""
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
    'check_pt2_archive', 'check_size_expression', 'check_graph_target'
]

# --------------------------------------------------------------------- pt2
#: Entries (relative to the archive root) that torch reads as data.
_PT2_DATA = re.compile(
    r'^(archive_format|archive_version|byteorder|\.data/version|'
    r'\.data/serialization_id|models/[^/]+\.json|extra/[^/]+|'
    r'data/weights/weight_\d+|data/constants/tensor_\d+|'
    r'data/weights/[^/]+_weights_config\.json|'
    r'data/constants/[^/]+_constants_config\.json)$')
_PT2_SAMPLE_INPUTS = re.compile(r'^data/sample_inputs/[^/]+\.pt$')


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
            inputs that need more than ``weights_only=True``, a symbolic
            size expression that is not arithmetic on size symbols
            (:func:`check_size_expression`), or any entry this check does
            not know.
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
                not re.match(r'^(weight|tensor)_\d+$',
                             str(meta.get('path_name'))):
            raise UnsafeModelError(
                f'Refused {path}: {fqn!r} in {rel} is stored as a pickle '
                '(use_pickle), which torch.export.load unpickles with '
                'weights_only=False and which can run arbitrary code. '
                'sapiens_mm never exports pickled weights; re-export the '
                'model with tools/deploy/export.py.')


def _check_sample_inputs(path: str, name: str, raw: bytes) -> None:
    import torch
    try:
        torch.load(io.BytesIO(raw), weights_only=True)
    except Exception as e:  # noqa: BLE001 (any failure means: refuse)
        raise UnsafeModelError(
            f'Refused {path}: its sample inputs ({name}) need more than '
            'tensors to load (torch.export.load would retry them with '
            f'weights_only=False): {str(e).splitlines()[0]}') from None


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
_SIZE_SYMBOL = re.compile(r'^[a-z]{1,3}\d+$')  # s0, u3, s77...
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
    r'^torch\.ops\.aten\.([a-z_][a-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)$')


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


def _graph_problems(graph: Any) -> Iterator[Tuple[str, Any, str]]:
    """``(kind, value, why)`` for every size expression and operator of a
    serialized graph that :func:`check_size_expression`,
    :func:`check_graph_target` or the in-place rule refuse."""
    todo = collections.deque([graph])  # in file order
    while todo:
        item = todo.popleft()
        if isinstance(item, dict):
            if isinstance(item.get('nodes'), list):  # a graph
                external = _tensor_names(item.get('inputs'))
                for node in item['nodes']:
                    if isinstance(node, dict) and 'target' in node:
                        why = _node_problem(node, external)
                        if why is not None:
                            yield 'operator', node['target'], why
            for k, v in item.items():
                if k == 'expr_str':
                    why = check_size_expression(v)
                    if why is not None:
                        yield 'symbolic size', v, why
                elif k != 'nodes':
                    todo.append(v)
                else:  # the nodes' own size expressions
                    todo.extend(v)
        elif isinstance(item, list):
            todo.extend(item)


def _check_graph(path: str, rel: str, raw: bytes) -> None:
    try:
        graph = json.loads(raw)
    except ValueError:
        raise UnsafeModelError(
            f'Refused {path}: its graph {rel} is not valid JSON.') from None
    for kind, value, why in _graph_problems(graph):
        shown = value[:80] if isinstance(value, str) else value
        raise UnsafeModelError(
            f'Refused {path}: its graph ({rel}) has the {kind} {shown!r}, '
            f'which a model export never has ({why}); loading or running '
            'it could execute code or write files. sapiens_mm writes no '
            'such graph; re-export the model with tools/deploy/export.py.')
