"""sapiens_mm is a guest in the user's process: ``import sapiens_mm``,
``init_model`` and an inferencer run change no process-wide state, each
checked in a fresh interpreter (the state is process-wide).

- a freed large buffer goes back to the system (``malloc`` keeps its
  settings: only whole programs tune it);
- mmengine's file backends and checkpoint loaders are the ones the process
  had, plus the names sapiens_mm adds and nobody else owns
  (``sapiens_atomic_local``, ``hf://``);
- warnings filters, thread counts, torch flags, the environment, torch's
  allowlist of unpickling globals, logging and signal handlers are
  unchanged;
- a stock mmpose checkpoint, written as mmengine's Runner writes one (numpy
  arrays in its meta, the message hub's buffers), loads through mmengine to
  the same tensors and objects with and without sapiens_mm, and fails the
  same way where stock loading fails.

Some packages sapiens_mm imports change the process at their own import
(mmseg sets ``TOKENIZERS_PARALLELISM`` and imports SciPy, which adds
warnings filters; ``torch._dynamo``, which Transformers imports through
mmdet, sets ``TORCHINDUCTOR_CACHE_DIR`` and allowlists a global): the
scripts import those first, so what is compared is what sapiens_mm itself
does.
"""
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
SEG_TINY = ROOT / 'configs/seg/goliath/sapiens_tiny-200e_goliath-256x192.py'
GIB = 2**30

SNAPSHOT = '''
import json, logging, os, signal, sys, warnings
import numpy as np
import torch
import torch._dynamo, mmengine.runner, mmseg.datasets, mmpose.datasets  # noqa

def name(o):
    return f'{getattr(o, "__module__", "")}.{getattr(o, "__qualname__", repr(o))}'

def snapshot():
    from mmengine.fileio.backends import backends, prefix_to_backends
    from mmengine.runner.checkpoint import CheckpointLoader
    return dict(
        backends={k: name(v) for k, v in backends.items()},
        prefixes={k: name(v) for k, v in prefix_to_backends.items()},
        schemes={k: name(v) for k, v in CheckpointLoader._schemes.items()},
        filters=[repr(f) for f in warnings.filters],
        threads=[torch.get_num_threads(), torch.get_num_interop_threads()],
        env=dict(os.environ),
        flags=[torch.backends.cudnn.benchmark,
               torch.backends.cudnn.deterministic,
               torch.backends.mkldnn.enabled,
               torch.get_float32_matmul_precision(),
               torch.are_deterministic_algorithms_enabled(),
               torch.is_grad_enabled(), str(torch.get_default_dtype()),
               torch.backends.cuda.matmul.allow_tf32,
               torch.backends.cudnn.allow_tf32],
        safe_globals=sorted(map(name, torch.serialization.get_safe_globals())),
        logging=[logging.getLogger().level,
                 len(logging.getLogger().handlers), logging.root.manager.disable],
        signals={int(s): repr(signal.getsignal(s))
                 for s in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD)})

def rss():
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1]) * 1024

before = snapshot()
import sapiens_mm
from sapiens_mm.apis import DenseInferencer, init_model
cfg = sys.argv[1]
model = init_model(cfg)
with torch.inference_mode():
    model(torch.zeros(1, 3, 64, 48), None, mode='tensor')
inferencer = DenseInferencer(cfg, device='cpu', show_progress=False)
inferencer(np.zeros((64, 48, 3), np.uint8))
after = snapshot()
base = rss()
buffer = np.ones(2**27)  # 1 GiB of float64, written
grown = rss()
del buffer
freed = rss()
print(json.dumps(dict(before=before, after=after,
                      rss=[base, grown, freed])))
'''


def _run(code, *args):
    proc = subprocess.run([sys.executable, '-c', code, *map(str, args)],
                          cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(platform.system() != 'Linux',
                    reason='reads /proc/self/status')
def test_import_init_model_and_inference_leave_the_process_alone():
    out = _run(SNAPSHOT, SEG_TINY)
    before, after = out['before'], out['after']
    added_backends = {
        k: v for k, v in after['backends'].items()
        if k not in before['backends']}
    assert added_backends == {
        'sapiens_atomic_local':
        'sapiens_mm.engine.fileio.atomic_local_backend.AtomicLocalBackend'}
    assert {k: after['backends'][k] for k in before['backends']} == \
        before['backends']
    assert after['prefixes'] == before['prefixes']
    assert {k: v for k, v in after['schemes'].items()
            if k != 'hf://'} == before['schemes']
    assert after['schemes']['hf://'] == 'sapiens_mm.zoo.loader.load_hub'
    for key in ('filters', 'threads', 'env', 'flags', 'safe_globals',
                'logging', 'signals'):
        assert after[key] == before[key], key
    base, grown, freed = out['rss']
    assert grown - base > 0.9 * GIB  # the buffer was resident
    assert freed - base < 0.1 * GIB  # and went back to the system


LOAD = '''
import hashlib, importlib, json, sys
import numpy as np
import torch
from mmengine.runner.checkpoint import CheckpointLoader
path, mode, cfg = sys.argv[1:4]
if mode == 'with':
    import sapiens_mm
    from sapiens_mm.apis import init_model
    init_model(cfg)

def digest(obj):
    if isinstance(obj, torch.Tensor):
        return ['tensor', str(obj.dtype), list(obj.shape), hashlib.sha256(
            obj.reshape(-1).contiguous().view(torch.uint8).numpy().tobytes()
        ).hexdigest()]
    if isinstance(obj, np.ndarray):
        return ['ndarray', str(obj.dtype), list(obj.shape),
                hashlib.sha256(obj.tobytes()).hexdigest()]
    if isinstance(obj, dict):
        return [type(obj).__name__, {str(k): digest(v) for k, v in obj.items()}]
    if isinstance(obj, (list, tuple)):
        return [type(obj).__name__, [digest(v) for v in obj]]
    if hasattr(obj, '__dict__'):
        return [type(obj).__qualname__, digest(vars(obj))]
    return [type(obj).__name__, repr(obj)]

def resolve(name):
    parts = name.split('.')
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module('.'.join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(name)

result = {}
try:
    result['default'] = digest(CheckpointLoader.load_checkpoint(
        path, map_location='cpu'))
except Exception as e:
    result['default'] = ['error', type(e).__name__]
# what a user who trusts the file does with stock mmengine and torch
trusted = [resolve(n) for n in
           torch.serialization.get_unsafe_globals_in_checkpoint(path)]
trusted += [getattr(np.dtypes, n) for n in dir(np.dtypes)
            if n.endswith('DType')]  # built by numpy's reduce, not named
with torch.serialization.safe_globals(trusted):
    result['trusted'] = digest(CheckpointLoader.load_checkpoint(
        path, map_location='cpu'))
print(json.dumps(result))
'''


def _build_stock_pose_model(models):
    """A tiny mmpose top-down estimator (MobileNetV2 at a quarter width and
    a heatmap head)."""
    return models.build(dict(
        type='TopdownPoseEstimator',
        backbone=dict(type='MobileNetV2', widen_factor=0.25,
                      out_indices=(7, )),
        head=dict(type='HeatmapHead', in_channels=1280, out_channels=17,
                  deconv_out_channels=None,
                  loss=dict(type='KeypointMSELoss', use_target_weight=True),
                  decoder=dict(type='MSRAHeatmap', input_size=(192, 256),
                               heatmap_size=(48, 64), sigma=2))))


def _stock_mmpose_checkpoint(path):
    """A tiny mmpose top-down model's checkpoint, with what mmengine's
    Runner.save_checkpoint puts in it (Runner meta with the dataset's
    metainfo, the message hub's state), saved by mmengine."""
    import mmengine
    from mmengine.logging import MessageHub
    from mmengine.runner.checkpoint import save_checkpoint, weights_to_cpu
    import mmpose
    from mmengine.registry import DefaultScope
    from mmpose.datasets.datasets.utils import parse_pose_metainfo
    from mmpose.registry import MODELS
    with DefaultScope.overwrite_default_scope('mmpose'):
        model = _build_stock_pose_model(MODELS)
    coco = Path(mmpose.__file__).parent / '.mim/configs/_base_/datasets/coco.py'
    metainfo = parse_pose_metainfo(dict(from_file=str(coco)))
    assert isinstance(metainfo['sigmas'], np.ndarray)
    hub = MessageHub.get_instance(f'stock_ckpt_{os.getpid()}')
    hub.update_scalar('train/loss', 0.5)
    hub.update_info('epoch', 3)
    checkpoint = dict(
        meta=dict(epoch=3, iter=30, cfg='model = dict()', seed=1234,
                  experiment_name='stock', time='20260101_000000',
                  mmengine_version=mmengine.__version__,
                  dataset_meta=metainfo),
        state_dict=weights_to_cpu(model.state_dict()),
        message_hub=hub.state_dict())
    save_checkpoint(checkpoint, str(path))


def test_stock_checkpoint_loads_the_same_with_and_without_sapiens_mm(
        tmp_path):
    path = tmp_path / 'epoch_3.pth'
    _stock_mmpose_checkpoint(path)
    without = _run(LOAD, path, 'without', SEG_TINY)
    with_ = _run(LOAD, path, 'with', SEG_TINY)
    assert with_ == without
    # stock loading refuses the numpy / mmengine objects (weights-only
    # unpickling), with sapiens_mm imported too; trusted, it reads them
    assert without['default'] == ['error', 'UnpicklingError']
    meta = without['trusted'][1]['meta'][1]
    assert meta['dataset_meta'][1]['sigmas'][0] == 'ndarray'
    assert len(without['trusted'][1]['state_dict'][1]) > 100


@pytest.mark.parametrize('device,kept', [('cpu', True), ('cuda', False)])
def test_the_command_line_tunes_malloc_for_cpu_runs(monkeypatch, device,
                                                    kept):
    """The inference command line, a whole program, makes malloc keep freed
    memory for its CPU runs (the library never does)."""
    import torch

    import sapiens_mm.apis.inferencers as inferencers
    from sapiens_mm.cli import infer
    from sapiens_mm.utils import cpu_allocator
    calls = []
    monkeypatch.setattr(cpu_allocator, 'keep_freed_memory',
                        lambda: calls.append(1) or True)
    # a stand-in that resolves its device as SapiensInferencer does
    monkeypatch.setattr(
        inferencers, 'SapiensInferencer', lambda **kwargs: SimpleNamespace(
            kwargs=kwargs, device=torch.device(kwargs['device'])))
    args = infer.build_parser().parse_args(['x.png', '--device', device])
    built = infer._build_inferencer(args, {}, device)
    assert built.kwargs['device'] == device
    assert calls == ([1] if kept else [])
