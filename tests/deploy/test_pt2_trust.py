"""A .pt2 graph is a program: only archives this installation exported (or
the user vouched for) are loaded, through every entry point.

Two real attacks are built from a genuine tiny export by editing its graph
(``models/model.json``): a symbolic size whose text runs a shell command
when ``torch.export.load`` hands it to sympy, and inserted
``aten.from_file(shared=True)`` + ``aten.fill_`` nodes that overwrite a
victim file when the graph runs. Each test asserts that the marker never
appears and the victim keeps its bytes.
"""
import io
import json
import os
import stat
import subprocess
import sys
import zipfile

import cv2
import numpy as np
import pytest
import torch
from mmengine.config import Config

from sapiens_mm.apis import DenseInferencer, SapiensInferencer
from sapiens_mm.apis.inference import set_input_size
from sapiens_mm.demo.web import WebDemo
from attack_helpers import (changed, plant_package, record_digest,
                            run_measured, tiff_two_sizes, tree_state)
from sapiens_mm.deploy import (ExportedModel, UnsafeModelError,
                               UntrustedModelError, check_graph_target,
                               check_guard_expression, check_pt2_archive,
                               check_size_expression, check_treespec,
                               export_model,
                               trust_exported_program, trust_store_path,
                               trusted_digests)
from tiny_configs import ROOT, TINY
from tool_helpers import load_tool

# one tiny seg export for the module (about 10 s on 2 cores)
pytestmark = pytest.mark.slow

VICTIM_BYTES = b'the victim file, untouched'
PAYLOAD = b'import os; os.system("x")  # .pth'
BYTE = 1  # torch._export.serde.schema.ScalarType.BYTE


def _rewrite_program(src, dst, edit):
    """Copy the archive ``src`` to ``dst`` with ``edit(program)`` applied to
    its serialized program (``models/model.json``; every other entry byte
    for byte)."""
    with zipfile.ZipFile(src) as z:
        items = {n: z.read(n) for n in z.namelist()}
    name = next(n for n in items if n.endswith('models/model.json'))
    program = json.loads(items[name])
    edit(program)
    items[name] = json.dumps(program).encode()
    with zipfile.ZipFile(dst, 'w') as z:
        for n, data in items.items():
            z.writestr(n, data)
    return str(dst)


def _rewrite_graph(src, dst, edit):
    """:func:`_rewrite_program` with ``edit(graph)``."""
    return _rewrite_program(
        src, dst, lambda program: edit(program['graph_module']['graph']))


def _code_in_size(graph, marker):
    """The first symbolic size becomes Python that touches ``marker``."""
    for value in graph['tensor_values'].values():
        for size in value['sizes']:
            if 'as_expr' in size:
                size['as_expr']['expr_str'] = \
                    f"__import__('os').system('touch {marker}')"
                return
    raise AssertionError('the export has no symbolic size')


def _file_write(graph, victim, payload):
    """Nodes that map ``victim`` shared (``aten.from_file``) and write
    ``payload`` into it byte by byte (``aten.select`` + ``aten.fill_``)."""

    def tensor(sizes):
        return dict(dtype=BYTE, sizes=[{'as_int': s} for s in sizes],
                    requires_grad=False, device={'type': 'cpu',
                                                 'index': None},
                    strides=[{'as_int': 1} for _ in sizes],
                    storage_offset={'as_int': 0}, layout=7)

    def node(target, name, inputs, sizes):
        graph['tensor_values'][name] = tensor(sizes)
        return dict(target=target, name=name, metadata={},
                    is_hop_single_tensor_return=None,
                    inputs=[dict(name=k, arg=v, kind=kind)
                            for k, v, kind in inputs],
                    outputs=[{'as_tensor': {'name': name}}])

    nodes = [node('torch.ops.aten.from_file.default', 'evil_file',
                  [('filename', {'as_string': str(victim)}, 1),
                   ('shared', {'as_bool': True}, 1),
                   ('size', {'as_int': len(payload)}, 1),
                   ('dtype', {'as_scalar_type': BYTE}, 2)], [len(payload)])]
    for i, b in enumerate(payload):
        nodes.append(node('torch.ops.aten.select.int', f'evil_sel{i}',
                          [('self', {'as_tensor': {'name': 'evil_file'}}, 1),
                           ('dim', {'as_int': 0}, 1),
                           ('index', {'as_int': i}, 1)], []))
        nodes.append(node('torch.ops.aten.fill_.Scalar', f'evil_fill{i}',
                          [('self', {'as_tensor': {'name': f'evil_sel{i}'}},
                            1), ('value', {'as_int': b}, 1)], []))
    graph['nodes'][:0] = nodes


@pytest.fixture(scope='module')
def files(tmp_path_factory):
    """A genuine tiny seg export (64x48) and the two attacks built from it;
    the victim file and the marker path live beside them."""
    root = tmp_path_factory.mktemp('pt2')
    cfg = set_input_size(Config.fromfile(str(TINY['seg'])), (64, 48))
    genuine = export_model(cfg, None, str(root), formats='pt2',
                           name='seg')['pt2']
    marker, victim = root / 'MARKER', root / 'victim.txt'
    code = _rewrite_graph(genuine, root / 'code.pt2',
                          lambda g: _code_in_size(g, marker))
    write = _rewrite_graph(genuine, root / 'write.pt2',
                           lambda g: _file_write(g, victim, PAYLOAD))
    img = root / 'img.png'
    cv2.imwrite(str(img), np.full((40, 30, 3), 90, np.uint8))
    return dict(genuine=genuine, code=code, write=write, marker=marker,
                victim=victim, img=str(img), root=root)


@pytest.fixture
def victim(files):
    """The victim file at its original bytes; afterwards: the marker is
    absent and the victim unchanged."""
    files['victim'].write_bytes(VICTIM_BYTES)
    files['marker'].unlink(missing_ok=True)
    yield files['victim']
    assert not files['marker'].exists(), 'the .pt2 ran a shell command'
    assert files['victim'].read_bytes() == VICTIM_BYTES, \
        'the .pt2 wrote into the victim file'


def test_attacks_are_real(files, victim):
    """torch's own loader runs both (so the refusals below are tested
    against working attacks), then the fixture's checks are reset."""
    with pytest.raises(Exception):  # the payload ran, then sympy failed
        torch.export.load(files['code'])
    assert files['marker'].exists()
    module = torch.export.load(files['write']).module()
    module(torch.zeros(1, 3, 64, 48))
    assert victim.read_bytes()[:len(PAYLOAD)] == PAYLOAD
    files['marker'].unlink()
    victim.write_bytes(VICTIM_BYTES)


@pytest.mark.parametrize('attack', ['code', 'write'])
def test_foreign_pt2_refused_by_every_entry_point(files, victim, attack,
                                                  capsys):
    path = files[attack]
    with pytest.raises(UntrustedModelError,
                       match='not exported by this installation'):
        ExportedModel(path)
    with pytest.raises(UntrustedModelError, match='a .pt2 graph is a '
                       'program'):
        SapiensInferencer(models={'seg': path}, device='cpu')
    with pytest.raises(UntrustedModelError, match='Re-export it here'):
        DenseInferencer(path, device='cpu')
    # tools/infer.py (in-process): one line, exit code 1
    infer = load_tool('infer')
    with pytest.raises(SystemExit) as exc:
        infer.cli([files['img'], '--seg', path, '--out-dir',
                   str(files['root'] / 'out')], prog='tools/infer.py')
    msg = str(exc.value.code)
    assert msg.startswith('tools/infer.py: error: Refused') and '\n' not in msg
    # the web demo's model loading: the error is the page's status line
    demo = WebDemo({'seg': {'evil.pt2': path}}, device='cpu',
                   out_root=str(files['root'] / 'web'))
    overlay, out, status = demo.run(files['img'], None, ['seg'],
                                    {'seg': 'evil.pt2'})
    assert overlay is None and out == [] and 'Refused' in status
    # the standalone runner, in-process
    runner = load_tool('deploy/run_exported')
    with pytest.raises(ValueError, match='not exported on this machine'):
        runner.main([path, files['img'], '--out-dir',
                     str(files['root'] / 'runner')])
    assert 'Traceback' not in capsys.readouterr().err


def test_python_m_sapiens_mm_refuses_both(files, victim):
    """``python -m sapiens_mm`` with each attack (one interpreter)."""
    script = (
        'import runpy, sys\n'
        f'for path in {[files["code"], files["write"]]!r}:\n'
        f'    sys.argv = ["sapiens_mm", {files["img"]!r}, "--seg", path,\n'
        f'                "--out-dir", {str(files["root"] / "m")!r}]\n'
        '    try:\n'
        '        runpy.run_module("sapiens_mm", run_name="__main__")\n'
        '    except SystemExit as e:\n'
        '        print("EXIT", e.code)\n')
    proc = subprocess.run([sys.executable, '-c', script], capture_output=True,
                          text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('EXIT')]
    assert len(lines) == 2, proc.stdout + proc.stderr[-2000:]
    assert all('python -m sapiens_mm: error: Refused' in ln and
               'not exported by this installation' in ln for ln in lines)


def test_vouched_attack_is_still_refused_by_the_graph_check(files, victim):
    """Vouching for an attack is refused and records nothing; a digest in
    the store does not turn off the graph check either: neither attack
    reaches torch (ExportedModel, the runner with --trust-pt2)."""
    before = trusted_digests()
    for attack in ('code', 'write'):
        with pytest.raises(UnsafeModelError, match='Refused'):
            trust_exported_program(files[attack])
    assert trusted_digests() == before
    record_digest(files['code'])
    record_digest(files['write'])
    with pytest.raises(UnsafeModelError, match='symbolic size.*__import__'):
        ExportedModel(files['code'])
    with pytest.raises(UnsafeModelError,
                       match="operator 'torch.ops.aten.from_file"):
        ExportedModel(files['write'])
    runner = load_tool('deploy/run_exported')
    for attack, what in (('code', 'symbolic size'), ('write', 'from_file')):
        with pytest.raises(ValueError, match=what):
            runner.load_model(files[attack], trust_pt2=True)


def test_size_and_operator_grammar():
    """What torch writes passes; anything that reaches Python does not. The
    standalone runner's copy of the checks agrees."""
    runner = load_tool('deploy/run_exported')
    for ok in ("Symbol('s77', positive=True, integer=True)",
               "Mul(Integer(2), Symbol('s0', positive=True, integer=True))",
               '2*s77', 'Max(1, s0 - 1)', 'FloorDiv(s0, 2)'):
        assert check_size_expression(ok) is None, ok
        assert runner.is_plain_size(ok), ok
    for bad in ("__import__('os').system('x')", "Symbol('x' * 9)",
                'Pow(Integer(9), Integer(99999))', 's0**99',
                "Symbol('s0').func", 'lambda: 0', 'exec("x")', 7):
        assert check_size_expression(bad) is not None, bad
        assert not runner.is_plain_size(bad), bad
    for ok in ('torch.ops.aten.conv2d.default', '_operator.add',
               'torch.ops.aten.select.int', 'torch.sym_max',
               'torch.ops.aten.gelu_.default'):  # in place: checked per graph
        assert check_graph_target(ok) is None, ok
        assert runner.is_model_node(dict(target=ok, inputs=[]), set()), ok
    for bad in ('torch.ops.aten.from_file.default', 'torch.save',
                'builtins.exec', 'torch.ops.aten.save.default',
                'torch.ops.aten.set_.source_Tensor',
                'torch.ops.aten.nosuch.default',
                'torch.ops.higher_order.cond', 'torch.ops.mylib.run.default'):
        assert check_graph_target(bad) is not None, bad
        assert not runner.is_model_node(dict(target=bad, inputs=[]), set()), bad


def test_own_export_is_trusted_and_tampering_is_not(files, tmp_path):
    """The exporter records its file (a 0600 store); other bytes make it
    foreign; --trust-pt2 records a copy the user vouches for."""
    store = trust_store_path()
    if os.name == 'posix':
        assert stat.S_IMODE(os.stat(store).st_mode) == 0o600
    entry = [v for v in trusted_digests().values()
             if v['path'] == os.path.abspath(files['genuine'])]
    assert entry and entry[-1]['source'] == 'exported'
    model = ExportedModel(files['genuine'])
    out = model(np.zeros((2, 3, 64, 48), np.float32))
    assert out.shape[0] == 2
    # the same program in a rewritten archive: other bytes, other digest
    tampered = _rewrite_graph(files['genuine'], tmp_path / 'tampered.pt2',
                              lambda graph: None)
    with pytest.raises(UntrustedModelError, match='Refused'):
        ExportedModel(tampered)
    # the CLI's --trust-pt2: the user vouches, the file is recorded
    infer = load_tool('infer')
    infer.cli([files['img'], '--seg', tampered, '--trust-pt2',
               '--out-dir', str(tmp_path / 'out'), '--no-progress'],
              prog='infer')
    assert (tmp_path / 'out' / 'seg' / 'img.npy').exists()
    assert [v['source'] for v in trusted_digests().values()
            if v['path'] == tampered] == ['vouched']


def test_store_writable_by_others_is_not_used(files, tmp_path, monkeypatch):
    if os.name != 'posix':
        pytest.skip('POSIX permissions')
    folder = tmp_path / 'store'
    folder.mkdir(mode=0o700)
    monkeypatch.setenv('SAPIENS_MM_TRUST_STORE', str(folder / 'trust.json'))
    trust_exported_program(files['genuine'])
    os.chmod(folder / 'trust.json', 0o622)
    with pytest.raises(UntrustedModelError, match='writable by other users'):
        ExportedModel(files['genuine'])


def _write_input(graph, through_view):
    """``aten.fill_`` on the graph's image input (or a view of it)."""
    name = graph['inputs'][-1]['as_tensor']['name']
    nodes = []
    if through_view:
        nodes.append(dict(
            target='torch.ops.aten.select.int', name='view', metadata={},
            is_hop_single_tensor_return=None,
            inputs=[dict(name='self', arg={'as_tensor': {'name': name}},
                         kind=1),
                    dict(name='dim', arg={'as_int': 0}, kind=1),
                    dict(name='index', arg={'as_int': 0}, kind=1)],
            outputs=[{'as_tensor': {'name': 'view'}}]))
        graph['tensor_values']['view'] = graph['tensor_values'][name]
        name = 'view'
    nodes.append(dict(
        target='torch.ops.aten.fill_.Scalar', name='filled', metadata={},
        is_hop_single_tensor_return=None,
        inputs=[dict(name='self', arg={'as_tensor': {'name': name}}, kind=1),
                dict(name='value', arg={'as_int': 0}, kind=1)],
        outputs=[{'as_tensor': {'name': 'filled'}}]))
    graph['tensor_values']['filled'] = graph['tensor_values'][name]
    graph['nodes'][:0] = nodes


@pytest.mark.parametrize('through_view', [False, True])
def test_in_place_write_to_the_input_is_refused(files, tmp_path,
                                                through_view):
    """In-place operators (our exports have some, e.g. ``gelu_``) may
    write only what the graph computed: not the caller's input array (a
    memory-mapped file, say), not even through a view."""
    path = _rewrite_graph(files['genuine'], tmp_path / 'in.pt2',
                          lambda g: _write_input(g, through_view))
    with pytest.raises(UnsafeModelError, match="fill_.*writes into the "
                       "model's input"):
        check_pt2_archive(path)
    runner = load_tool('deploy/run_exported')
    with pytest.raises(ValueError, match='fill_'):
        runner.check_pt2(path, trusted=True)
    check_pt2_archive(files['genuine'])  # the genuine graph passes


# ------------------------------------------- what .module() compiles / imports
PLANTED = 'sapiens_mm_planted_pt2'


def _guard_at_call(program, marker):
    """A guard that runs a shell command when the module is called
    (``.module()`` pastes guards into a function it ``exec``s)."""
    program['guards_code'] = [
        f"__import__('os').system('touch {marker}') == 0"]


def _guard_at_module(program, marker):
    """A guard whose line breaks end torch's generated function: the
    statement after it runs while ``.module()`` compiles the guards (the
    ``#`` keeps the text one expression once torch strips the breaks for
    its error message)."""
    program['guards_code'] = [
        f"1#\n)\n__import__('os').system('touch {marker}')\n"
        'def _(*args):\n  (1']


def _pytree_import(program, marker):
    """A dict context whose ``__enum__`` object makes torch import the
    module ``PLANTED`` while the archive loads."""
    del marker  # the planted package writes it
    sig = program['graph_module']['module_call_graph'][0]['signature']
    protocol, spec = json.loads(sig['in_spec'])
    todo = [spec]
    while todo:  # the kwargs dict of the call
        node = todo.pop()
        if node['type'] == 'builtins.dict':
            node['context'] = json.dumps(
                [{'__enum__': True, 'fqn': f'{PLANTED}:X', 'name': 'A'}])
            break
        todo.extend(node['children_spec'])
    else:
        raise AssertionError('the export has no dict in its input spec')
    sig['in_spec'] = json.dumps([protocol, spec])


CODE_ATTACKS = dict(guard_at_call=_guard_at_call,
                    guard_at_module=_guard_at_module,
                    pytree_import=_pytree_import)


@pytest.fixture(scope='module')
def code_attacks(files, tmp_path_factory):
    """The genuine export with each attack of :data:`CODE_ATTACKS`, and the
    package the pytree attack imports, planted in a folder of its own."""
    root = tmp_path_factory.mktemp('pt2_code')
    marker = root / 'MARKER'
    plant = root / 'plant'
    plant_package(plant, PLANTED, marker)
    paths = {name: _rewrite_program(files['genuine'], root / f'{name}.pt2',
                                    lambda p, e=edit: e(p, marker))
             for name, edit in CODE_ATTACKS.items()}
    return dict(paths, marker=marker, plant=plant, root=root)


def test_module_time_attacks_are_real(code_attacks, files, monkeypatch):
    """torch's own loader runs each: the guard when the module is called,
    the broken-out guard at ``.module()``, the pytree spec while loading."""
    marker = code_attacks['marker']
    images = torch.zeros(1, 3, 64, 48)
    module = torch.export.load(code_attacks['guard_at_call']).module()
    assert not marker.exists()
    module(images)
    assert marker.exists()
    marker.unlink()
    program = torch.export.load(code_attacks['guard_at_module'])
    assert not marker.exists()
    program.module()
    assert marker.exists()
    marker.unlink()
    monkeypatch.syspath_prepend(str(code_attacks['plant']))
    with pytest.raises(Exception):  # imported, then no attribute X
        torch.export.load(code_attacks['pytree_import'])
    assert marker.exists()
    marker.unlink()
    sys.modules.pop(PLANTED, None)


@pytest.mark.parametrize('attack', list(CODE_ATTACKS))
def test_vouched_module_time_attacks_are_refused(code_attacks, files, attack,
                                                 monkeypatch, capsys):
    """--trust-pt2 (the CLI and the standalone runner): one line, nothing
    runs or is imported, and the refused file leaves no digest in the trust
    store (nor any other file outside the run's output folder)."""
    monkeypatch.syspath_prepend(str(code_attacks['plant']))
    path, marker = code_attacks[attack], code_attacks['marker']
    store = trust_store_path()
    store_before = open(store, 'rb').read()
    out = code_attacks['root'] / f'out_{attack}'
    before = tree_state(files['root'])
    before_attacks = tree_state(code_attacks['root'], skip=[out])
    infer = load_tool('infer')
    with pytest.raises(SystemExit) as exc:
        infer.cli([files['img'], '--seg', path, '--trust-pt2', '--out-dir',
                   str(out)], prog='tools/infer.py')
    msg = str(exc.value.code)
    assert msg.startswith('tools/infer.py: error: Refused') and \
        '\n' not in msg, msg
    kind = 'pytree spec' if attack == 'pytree_import' else 'guard'
    assert f'has the {kind}' in msg, msg
    runner = load_tool('deploy/run_exported')
    with pytest.raises(ValueError, match=kind.split()[-1]) as err:
        runner.main([path, files['img'], '--trust-pt2', '--out-dir',
                     str(out / 'runner')])
    assert '\n' not in str(err.value)
    assert 'Traceback' not in capsys.readouterr().err
    assert not marker.exists(), 'the archive ran code'
    assert PLANTED not in sys.modules, 'the archive imported a module'
    assert open(store, 'rb').read() == store_before, \
        'a refused file was recorded as trusted'
    assert path not in [v['path'] for v in trusted_digests().values()]
    assert changed(before, tree_state(files['root'])) == {}
    assert changed(before_attacks, tree_state(code_attacks['root'],
                                              skip=[out])) == {}


def test_python_m_sapiens_mm_vouched_attacks(code_attacks, files):
    """``python -m sapiens_mm --trust-pt2`` in the folder that holds the
    planted package (so that an import of it would succeed): each attack is
    one line, exit code 1, nothing runs."""
    script = (
        'import runpy, sys\n'
        f'for name in {list(CODE_ATTACKS)!r}:\n'
        f'    sys.argv = ["sapiens_mm", {files["img"]!r}, "--seg",\n'
        '                name + ".pt2", "--trust-pt2", "--out-dir", "m"]\n'
        '    try:\n'
        '        runpy.run_module("sapiens_mm", run_name="__main__")\n'
        '    except SystemExit as e:\n'
        '        print("EXIT", e.code)\n')
    for name in CODE_ATTACKS:  # the archives beside the planted package
        os.link(code_attacks[name], code_attacks['plant'] / f'{name}.pt2')
    proc = subprocess.run([sys.executable, '-c', script], capture_output=True,
                          text=True, timeout=300, cwd=code_attacks['plant'],
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('EXIT')]
    assert len(lines) == 3, proc.stdout + proc.stderr[-2000:]
    assert all('python -m sapiens_mm: error: Refused' in ln for ln in lines)
    assert not code_attacks['marker'].exists()


def test_guard_spec_and_name_grammar():
    """What torch writes passes; anything that reaches Python, imports or
    breaks out of the generated source does not. The standalone runner's
    copy agrees."""
    runner = load_tool('deploy/run_exported')
    for ok in ("L['images'].size()[0] <= 64",
               "2*L['flat_args'][0].size()[1] % 2 == 0",
               "max(1, L['x'].size()[0]) > 2 and not L['x'].dim() == 3",
               "math.floor(L['x'].size()[0] / 2) == 3"):
        assert check_guard_expression(ok) is None, ok
        assert runner.is_plain_guard(ok), ok
    for bad in ("__import__('os').system('x') == 0", "L['x'].__class__",
                "L['a b'].size()[0] == 1", '(lambda: 0)()', "L['x'] ** 9",
                "L['x'].size()[0] == 1\n", 'os.system', '"a" == "a"',
                "L[\"x\"].size()[0]", 7):
        assert check_guard_expression(bad) is not None, bad
        assert not runner.is_plain_guard(bad), bad
    leaf = dict(type=None, context=None, children_spec=[])
    for ok in ([1, leaf],
               [1, dict(type='builtins.tuple', context='null',
                        children_spec=[leaf, dict(type='builtins.dict',
                                                  context='["images", 3]',
                                                  children_spec=[leaf,
                                                                 leaf])])]):
        assert check_treespec(json.dumps(ok)) is None, ok
        assert runner.is_plain_treespec(json.dumps(ok)), ok
    enum = json.dumps([{'__enum__': True, 'fqn': 'os:X', 'name': 'A'}])
    for bad in ([1, dict(leaf, type='collections.defaultdict')],
                [1, dict(type='builtins.dict', context=enum,
                         children_spec=[leaf])],
                [1, dict(type='builtins.dict', context='["a b"]',
                         children_spec=[leaf])], [2, leaf], 'x'):
        assert check_treespec(json.dumps(bad)) is not None, bad
        assert not runner.is_plain_treespec(json.dumps(bad)), bad


@pytest.mark.parametrize('where', ['value', 'input', 'parameter'])
def test_names_written_into_generated_code_are_checked(files, tmp_path,
                                                       where):
    """torch writes the graph's value, input and parameter names into the
    Python source of the module it generates: a name that is not a Python
    name (a line break, quotes, brackets) is refused by both checks."""
    evil = "x):\n    pass\nimport os\ndef f(y"

    def edit(program):
        graph = program['graph_module']['graph']
        if where == 'value':
            node = next(n for n in graph['nodes']
                        if 'as_tensor' in n['outputs'][0])
            old = node['outputs'][0]['as_tensor']['name']
            node['outputs'][0]['as_tensor']['name'] = evil
            graph['tensor_values'][evil] = graph['tensor_values'].pop(old)
        elif where == 'input':
            graph['inputs'][-1]['as_tensor']['name'] = evil
        else:
            spec = program['graph_module']['signature']['input_specs'][0]
            next(iter(spec.values()))['parameter_name'] = 'w")\nimport os#'

    path = _rewrite_program(files['genuine'], tmp_path / 'names.pt2', edit)
    with pytest.raises(UnsafeModelError, match='not a Python name'):
        check_pt2_archive(path)
    runner = load_tool('deploy/run_exported')
    with pytest.raises(ValueError, match='Refused'):
        runner.check_pt2(path, trusted=True)


def test_sample_input_keys_are_checked(files, tmp_path):
    """``.module()`` writes the keys of the sample inputs into the guard
    code it compiles: a key that is not a Python name is refused by both
    checks (the sample inputs are otherwise plain tensors)."""
    with zipfile.ZipFile(files['genuine']) as z:
        items = {n: z.read(n) for n in z.namelist()}
    name = next(n for n in items if n.endswith('.pt') and 'sample_inputs'
                in n)
    buf = io.BytesIO()
    torch.save(((), {"x'] + 1 == 2 or L['": torch.zeros(1, 3, 64, 48)}),
               buf)
    items[name] = buf.getvalue()
    path = tmp_path / 'keys.pt2'
    with zipfile.ZipFile(path, 'w') as z:
        for n, data in items.items():
            z.writestr(n, data)
    with pytest.raises(UnsafeModelError, match='not a Python name'):
        check_pt2_archive(str(path))
    runner = load_tool('deploy/run_exported')
    with pytest.raises(ValueError, match='sample inputs'):
        runner.check_pt2(str(path), trusted=True)


def test_runner_refuses_an_image_over_the_pixel_limit(files, tmp_path):
    """The standalone runner decodes with OpenCV; run as a program it sets
    OpenCV's own pixel limit, so the TIFF whose second size tags say 64 x
    64 but whose first (libtiff's) say 30000 x 30000 is refused by the
    decoder from the size it reads, in one line, costing no more memory
    than a 64 x 64 PNG (a decode would add 2.5 GiB; 64 MiB is the margin
    for allocator noise)."""
    tiff_two_sizes(tmp_path / 'twice.tif', 30000, 64)
    cv2.imwrite(str(tmp_path / 'small.png'), np.zeros((64, 64, 3),
                                                       np.uint8))
    runner = str(ROOT / 'tools/deploy/run_exported.py')
    peaks = {}
    for name in ('small.png', 'twice.tif'):
        rc, out, err, peaks[name] = run_measured(
            [runner, files['genuine'], name, '--out-dir', 'out'], tmp_path)
        assert rc == (0 if name == 'small.png' else 1), err[-2000:]
    lines = err.strip().splitlines()
    assert len(lines) == 1 and 'Cannot read image twice.tif' in lines[0] \
        and 'OPENCV_IO_MAX_IMAGE_PIXELS' in lines[0], err
    assert peaks['twice.tif'] < peaks['small.png'] + 64, peaks
    assert sorted(p.name for p in (tmp_path / 'out').iterdir()) == [
        'outputs.json', 'small.seg.npy']
