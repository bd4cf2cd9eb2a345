"""Files users download never run code: exported models (.onnx / .pt2
metadata, .pt2 weights) and checkpoints (numpy gadgets, trusted types).

Every attack file writes a marker file if its payload runs; the tests check
that the marker is never created (and, where cheap, that the file is a real
attack: the naive loader does create the marker)."""
import io
import json
import os
import pickle
import subprocess
import sys
import zipfile

import numpy as np
import onnx
import pytest
import torch
import torch.nn as nn
from mmengine.config import Config

from attack_helpers import changed, record_digest, tree_state
from sapiens_mm.cli.infer import cli as infer_cli
from sapiens_mm.checkpoint import (CheckpointTypeError, TrustedTypeError,
                                   add_trusted_types, load_file)
from sapiens_mm.deploy import (ExportedModel, UnsafeModelError,
                               check_pt2_archive, config_from_data,
                               config_to_data, read_metadata,
                               trust_exported_program)
from tiny_configs import ROOT, TINY

PYTHON_PAYLOAD = "__import__('os').system('touch {marker}')\n"


def _meta(task, config):
    return dict(format='sapiens_mm.export', format_version=1, task=task,
                input_name='images', input_size=[64, 48], config=config)


def _evil_onnx(path, marker):
    """An ONNX file with no graph whose metadata config is Python text that
    runs a shell command (what metadata version 1 stored, and what
    Config.fromstring(..., '.py') executed)."""
    model = onnx.ModelProto(ir_version=8)
    for key, value in _meta('pose', PYTHON_PAYLOAD.format(
            marker=marker)).items():
        model.metadata_props.add(key=key, value=json.dumps(value))
    path.write_bytes(model.SerializeToString())
    return path


def _evil_zip_pt2(path, marker):
    """A zip named .pt2 holding only the metadata entry, config = code."""
    with zipfile.ZipFile(path, 'w') as z:
        z.writestr('evil/extra/sapiens_mm.json', json.dumps(
            _meta('seg', PYTHON_PAYLOAD.format(marker=marker))))
    return path


class CodeRunner:
    """Unpickling this runs a shell command."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f'touch {self.marker}', ))


def _pickled_weight_pt2(path, marker):
    """A genuine torch.export archive whose weights config marks one weight
    ``use_pickle`` and whose payload is a torch.save'd CodeRunner: torch's
    loader unpickles it with weights_only=False."""
    lin = nn.Linear(2, 2)
    program = torch.export.export(lin, (torch.zeros(1, 2), ))
    plain = path.with_name('plain.pt2')
    torch.export.save(program, str(plain), extra_files={
        'sapiens_mm.json': json.dumps(_meta('seg', {}))})
    buf = io.BytesIO()
    torch.save(CodeRunner(marker), buf)
    with zipfile.ZipFile(plain) as src:
        items = {n: src.read(n) for n in src.namelist()}
    cfg_name = next(n for n in items
                    if n.endswith('model_weights_config.json'))
    cfg = json.loads(items[cfg_name])
    entry = cfg['config']['weight']
    entry['use_pickle'] = True
    items[cfg_name] = json.dumps(cfg).encode()
    weight_name = next(n for n in items
                       if n.endswith(f'data/weights/{entry["path_name"]}'))
    items[weight_name] = buf.getvalue()
    with zipfile.ZipFile(path, 'w') as dst:
        for name, data in items.items():
            dst.writestr(name, data)
    return path


def _image(tmp_path):
    import cv2
    p = tmp_path / 'img.png'
    cv2.imwrite(str(p), np.full((32, 24, 3), 128, np.uint8))
    return str(p)


def _cli_error(capsys, run, *args):
    """Run a CLI entry point; return its one-line error (exit code 1)."""
    with pytest.raises(SystemExit) as exc:
        run(list(args), prog='cli')
    assert exc.value.code not in (0, None)
    msg = str(exc.value.code)
    assert '\n' not in msg and 'Traceback' not in msg
    assert 'Traceback' not in capsys.readouterr().err
    return msg


# ------------------------------------------------------ exported models
def test_onnx_metadata_code_is_never_run(tmp_path, capsys):
    marker = tmp_path / 'pwned_onnx'
    evil = _evil_onnx(tmp_path / 'evil.onnx', marker)
    assert evil.stat().st_size < 300  # a tiny file with no graph
    # the naive reading (what the inferencer did) runs the payload
    text = read_metadata(str(evil))['config']
    subprocess.run([sys.executable, '-c', text], check=True)
    assert marker.exists()
    marker.unlink()
    with pytest.raises(UnsafeModelError, match='Python text'):
        config_from_data(text, str(evil))
    msg = _cli_error(capsys, infer_cli, _image(tmp_path), '--checkpoints',
                     str(evil), '--out-dir', str(tmp_path / 'out'))
    assert 'Re-export' in msg and 'your own config' in msg
    assert not marker.exists()


def test_zip_named_pt2_metadata_code_is_never_run(tmp_path, capsys):
    marker = tmp_path / 'pwned_pt2'
    evil = _evil_zip_pt2(tmp_path / 'evil.pt2', marker)
    assert evil.stat().st_size < 400
    msg = _cli_error(capsys, infer_cli, _image(tmp_path), '--seg',
                     str(evil), '--out-dir', str(tmp_path / 'out'))
    assert 'Python text' in msg
    assert not marker.exists()


@pytest.mark.slow
def test_python_m_sapiens_mm_refuses_evil_onnx(tmp_path):
    """The reported command line, end to end: one line, exit 1, no code."""
    marker = tmp_path / 'pwned_cli'
    evil = _evil_onnx(tmp_path / 'evil.onnx', marker)
    proc = subprocess.run(
        [sys.executable, '-m', 'sapiens_mm', _image(tmp_path),
         '--checkpoints', str(evil), '--out-dir', str(tmp_path / 'o')],
        capture_output=True, text=True, cwd=str(ROOT), timeout=300,
        env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert 'Traceback' not in proc.stderr
    assert 'error:' in proc.stderr.strip().splitlines()[-1]
    assert not marker.exists()


@pytest.mark.slow
def test_pt2_pickled_weight_refused_before_torch(tmp_path):
    marker = tmp_path / 'pwned_weight'
    evil = _pickled_weight_pt2(tmp_path / 'evil.pt2', marker)
    # torch's own loader runs the payload (the attack is real) ...
    subprocess.run([sys.executable, '-c',
                    f'import torch; torch.export.load({str(evil)!r})'],
                   capture_output=True, timeout=300)
    assert marker.exists()
    marker.unlink()
    # ... sapiens_mm refuses the file before torch reads it: it was not
    # exported here, and even when vouched for, its pickled weight
    with pytest.raises(UnsafeModelError, match="'weight'.*use_pickle"):
        check_pt2_archive(str(evil))
    with pytest.raises(UnsafeModelError, match='not exported by this'):
        ExportedModel(str(evil))
    with pytest.raises(UnsafeModelError, match='use_pickle'):
        trust_exported_program(str(evil))  # vouching records nothing
    with pytest.raises(UnsafeModelError, match='not exported by this'):
        ExportedModel(str(evil))
    record_digest(evil)  # a digest in the store does not turn it off
    with pytest.raises(UnsafeModelError, match='use_pickle'):
        ExportedModel(str(evil))
    assert not marker.exists()
    # and so does the standalone runner, with --trust-pt2 too
    proc = subprocess.run(
        [sys.executable, str(ROOT / 'tools/deploy/run_exported.py'),
         str(evil), _image(tmp_path), '--out-dir', str(tmp_path / 'o'),
         '--trust-pt2'],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and 'use_pickle' in proc.stderr
    assert 'Traceback' not in proc.stderr
    assert not marker.exists()
    # a genuine archive passes the check and loads
    check_pt2_archive(str(tmp_path / 'plain.pt2'))


def test_stored_config_is_data_and_code_values_are_refused():
    cfg = Config.fromfile(str(TINY['pose']))
    data = config_to_data(cfg)
    json.dumps(data)  # plain JSON
    back = config_from_data(json.loads(json.dumps(data)), 'm.onnx')
    want = cfg.to_dict()
    want.pop('custom_imports')  # sapiens_mm itself, imported anyway
    assert back.to_dict() == want  # tuples stay tuples
    assert isinstance(back.model.head.decoder.input_size, tuple)

    def refused(change, match):
        bad = json.loads(json.dumps(data))
        change(bad)
        with pytest.raises(UnsafeModelError, match=match):
            config_from_data(bad, 'm.onnx')

    # mmengine's Registry.get imports any dotted name it does not know
    refused(lambda d: d['model'].update(type='os.system'), 'os.system')
    refused(lambda d: d['test_dataloader']['dataset']['pipeline'].append(
        dict(type='subprocess.Popen', args='touch x')), 'subprocess')
    refused(lambda d: d['model']['head'].update(type='eval'), 'eval')
    # mmpose executes a metainfo from_file; custom_imports imports modules
    refused(lambda d: d['test_dataloader']['dataset'].update(
        metainfo=dict(from_file='/tmp/evil.py')), 'from_file')
    refused(lambda d: d.update(custom_imports=dict(imports=['antigravity'])),
            'custom_imports')
    with pytest.raises(ValueError, match='plain data'):
        config_to_data(dict(model=dict(type=nn.Linear)))


def test_random_bytes_onnx_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / 'noise.onnx'
    bad.write_bytes(np.random.default_rng(0).bytes(512))
    with pytest.raises(ValueError, match='not a readable ONNX model'):
        read_metadata(str(bad))
    msg = _cli_error(capsys, infer_cli, _image(tmp_path), '--checkpoints',
                     str(bad), '--out-dir', str(tmp_path / 'o'))
    assert 'noise.onnx is not a readable ONNX model' in msg


# ----------------------------------------------------------- checkpoints
class ForgedDType:
    """``numpy.dtype('V8')`` whose pickled state gives it an object field
    ``'a'`` but clears its "has objects" flags (the last state entry)."""

    def __reduce__(self):
        return (np.dtype, ('V8', False, True),
                (3, '|', None, ('a', ), {'a': (np.dtype('O'), 0)}, 8, 1, 0))


class VoidScalarGadget:
    """``numpy.core.multiarray.scalar(ForgedDType, raw_bytes)``: a void
    scalar whose object field is the pointer 0x4141414141414141. Built only
    from allowlisted globals; reading it segfaults."""

    def __reduce__(self):
        from numpy.core import multiarray
        return (multiarray.scalar, (ForgedDType(), b'A' * 8))


class VoidArrayGadget:
    """The same forged pointer through ``_reconstruct`` + ndarray state."""

    def __reduce__(self):
        from numpy.core import multiarray
        return (multiarray._reconstruct, (np.ndarray, (0, ), b'b'),
                (1, (1, ), ForgedDType(), False, b'A' * 8))


def test_numpy_object_pointer_gadgets_refused(tmp_path):
    path = tmp_path / 'gadget.pth'
    torch.save({'meta': VoidScalarGadget()}, path)
    # the allowlist alone loads it, and reading it segfaults (subprocess)
    crash = subprocess.run([sys.executable, '-c', (
        'import numpy as np, torch\n'
        'from numpy.core import multiarray as m\n'
        'ok = [np.ndarray, np.dtype, m._reconstruct, m.scalar] + [getattr('
        'np.dtypes, n) for n in dir(np.dtypes) if n.endswith("DType")]\n'
        'with torch.serialization.safe_globals(ok):\n'
        f'    x = torch.load({str(path)!r}, weights_only=True)\n'
        'print(repr(x["meta"]))\n')], capture_output=True, timeout=120)
    assert crash.returncode < 0, crash  # killed by a signal (SIGSEGV)
    with pytest.raises(CheckpointTypeError, match='numpy scalar') as err:
        load_file(str(path))
    assert 'add_trusted_types' not in str(err.value)
    array = tmp_path / 'gadget_array.pth'
    torch.save({'meta': [VoidArrayGadget()]}, array)
    with pytest.raises(CheckpointTypeError, match='forged object pointers'):
        load_file(str(array))
    # the Runner's --resume / load_from path (mmengine's loader inside
    # safe_checkpoint_loading, as tools/train.py runs it) is the same
    from mmengine.runner.checkpoint import _load_checkpoint

    from sapiens_mm.zoo import safe_checkpoint_loading
    with safe_checkpoint_loading(), pytest.raises(CheckpointTypeError,
                                                  match='numpy scalar'):
        _load_checkpoint(str(path), map_location='cpu')
    # real numpy scalars, including structured ones, still load
    ok = tmp_path / 'ok.pth'
    rec = np.zeros((), dtype=[('x', '<f4'), ('y', '<i8')])[()]
    torch.save({'a': np.float64(0.5), 'b': np.int64(3), 'c': rec}, ok)
    got = load_file(str(ok))
    assert got['a'] == 0.5 and got['b'] == 3 and got['c'].dtype == rec.dtype


class NumpyRunner:
    """Unpickling this calls a numpy function outside the allowlist
    (``numpy.testing``'s ``runstring`` executes a string)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        from numpy.testing._private.utils import runstring
        return (runstring, (f'open({self.marker!r}, "w")', {}))


@pytest.mark.parametrize('protocol', [2, 4, 5])
def test_numpy_gadget_is_named_in_one_line(tmp_path, protocol, capsys):
    """torch's safe loader stops at the first opcode it does not read
    (protocol 4+ framing) before it sees the global, and says only "Please
    file an issue": the refusal still names the numpy function the pickle
    references and that it can never be allowed, in one line (the loader
    and the CLI); nothing runs."""
    marker = tmp_path / 'pwned'
    path = tmp_path / f'gadget{protocol}.pth'
    torch.save({'state_dict': {'w': torch.zeros(2)},
                'meta': NumpyRunner(marker)}, path, pickle_protocol=protocol)
    with pytest.raises(CheckpointTypeError) as err:
        load_file(str(path))
    msg = str(err.value)
    assert 'numpy.testing._private.utils.runstring' in msg, msg
    assert 'cannot be allowed' in msg and 'add_trusted_types' not in msg
    assert '\n' not in msg and '()' not in msg
    img = _image(tmp_path)
    before = tree_state(tmp_path, skip=[tmp_path / 'o'])
    cli = _cli_error(capsys, infer_cli, img, '--pose', str(path),
                     '--out-dir', str(tmp_path / 'o'))
    assert 'runstring' in cli and 'not a valid PyTorch checkpoint' not in cli
    assert not marker.exists()
    assert changed(before, tree_state(tmp_path, skip=[tmp_path / 'o'])) == {}


def test_protocol_4_checkpoint_says_what_to_do(tmp_path):
    """A harmless checkpoint pickled with protocol 4: not "not a valid
    PyTorch checkpoint ()", but what is wrong and how to fix it."""
    path = tmp_path / 'p4.pth'
    torch.save({'state_dict': {'w': torch.zeros(2)}}, path,
               pickle_protocol=4)
    with pytest.raises(pickle.UnpicklingError,
                       match='pickled with protocol 4.*save it again') as err:
        load_file(str(path))
    assert '\n' not in str(err.value)


def test_refusal_never_suggests_allowlisting_code(tmp_path):
    marker = tmp_path / 'pwned'
    path = tmp_path / 'evil.pth'
    torch.save({'x': CodeRunner(marker)}, path)
    with pytest.raises(CheckpointTypeError, match='system') as err:
        load_file(str(path))
    assert 'add_trusted_types' not in str(err.value)
    assert 'SAPIENS_MM_TRUSTED_TYPES' not in str(err.value)
    assert 'malicious' in str(err.value)
    assert not marker.exists()


class EvalRunner:
    """Unpickling this calls ``eval`` (torch reports the global bare:
    ``GLOBAL eval``)."""

    def __reduce__(self):
        return (eval, ('1 + 1', ))


def test_builtin_refusal_names_the_builtin_and_suggests_nothing(tmp_path):
    path = tmp_path / 'eval.pth'
    torch.save({'x': EvalRunner()}, path)
    with pytest.raises(CheckpointTypeError, match='builtins.eval') as err:
        load_file(str(path))
    assert 'add_trusted_types' not in str(err.value)
    assert 'malicious' in str(err.value)


@pytest.mark.parametrize('name', [
    'os.system', 'posix.system', 'subprocess.Popen', 'subprocess.run',
    'builtins.eval', 'builtins.exec', 'builtins.compile', 'builtins.getattr',
    'builtins.__import__', 'builtins.open', 'shutil.rmtree',
    'importlib.import_module', 'pickle.loads', 'functools.partial'
])
def test_code_running_types_cannot_be_trusted(tmp_path, monkeypatch, name):
    with pytest.raises(TrustedTypeError, match='Refused to trust'):
        add_trusted_types([name])
    ok = tmp_path / 'ok.pth'
    torch.save({'w': torch.ones(1)}, ok)
    monkeypatch.setenv('SAPIENS_MM_TRUSTED_TYPES', name)
    with pytest.raises(TrustedTypeError, match='SAPIENS_MM_TRUSTED_TYPES'):
        load_file(str(ok))


def test_callables_cannot_be_trusted_even_as_objects():
    import subprocess as sp
    for obj in (os.system, eval, getattr, sp.Popen, np.load):
        with pytest.raises(TrustedTypeError):
            add_trusted_types([obj])


def test_bad_trusted_types_variable_names_the_variable(tmp_path,
                                                       monkeypatch):
    ok = tmp_path / 'ok.pth'
    torch.save({'w': torch.ones(1)}, ok)
    for value in ('no_such_module_xyz.Thing', 'justaname',
                  'collections.NoSuchClass'):
        monkeypatch.setenv('SAPIENS_MM_TRUSTED_TYPES', value)
        with pytest.raises(TrustedTypeError,
                           match='SAPIENS_MM_TRUSTED_TYPES') as err:
            load_file(str(ok))
        assert value in str(err.value)
    monkeypatch.setenv('SAPIENS_MM_TRUSTED_TYPES', 'collections.Counter')
    assert torch.equal(load_file(str(ok))['w'], torch.ones(1))


@pytest.mark.parametrize('content', [b'', b'\x00' * 7, None])
def test_empty_or_random_pth_is_a_clear_error(tmp_path, content):
    path = tmp_path / 'bad.pth'
    path.write_bytes(np.random.default_rng(1).bytes(4096)
                     if content is None else content)
    with pytest.raises(Exception) as err:
        load_file(str(path))
    msg = str(err.value)
    assert f'Cannot read checkpoint {path}' in msg
    assert 'not a valid PyTorch checkpoint' in msg
    assert 'weights_only' not in msg and 'Re-running' not in msg
    assert not isinstance(err.value, EOFError)
