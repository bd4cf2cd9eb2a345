"""A second CPU: the package on an AVX2-only x86 CPU (Haswell), emulated by
Debian's user-mode QEMU (``qemu-x86_64 -cpu Haswell``), whose CPUID is what
PyTorch and oneDNN read; ``/proc/cpuinfo`` shows the emulated CPU too (a
Haswell flags line bind-mounted over it in a private mount namespace,
``unshare -m``, root only). Tiny pose, seg and Sapiens2 normal models run
in ``auto``, ``fp32`` and ``bf16`` through the inferencers and ``python -m
sapiens_mm`` (tests/helpers/emulated_cpu_run.py, one process per CPU), on
weights made here, and each output is compared with the same model run
natively (this machine's CPU, with its AVX-512 kernels, C kernels and
packed linear layers where it has them).

Tolerances:

- float32 (``fp32``, and ``auto``, which is float32 on Haswell): the same
  float32 model, with sums in other orders (AVX2 against AVX-512 kernels,
  PyTorch's attention and norms against the C kernels, MKL against oneDNN
  GEMMs): each output within 1e-4 of the native one relative to its
  largest value (float32 rounding is 6e-8; tiny models with 2 layers and a
  few convolutions add up a few hundred roundings; measured 2e-7 to
  5e-6).
- bf16: both runs round to bf16 (8 significant bits) at different places
  (emulated: PyTorch's bf16 ops and plain linear layers; native: bf16 GEMMs
  with fused epilogues, the C kernels), so neither is a reference for the
  other: each is compared with the native float32 output, and the emulated
  run's error must be within 3x the native bf16 run's (plus 1 % of the
  largest value; measured 0.8-1.3x).
- Label maps of the command (argmax of random-weight logits, where
  near-ties flip with any rounding): float32 runs agree on >= 99 % of the
  pixels; bf16 runs disagree with native float32 at most 3x as often as
  native bf16 does, plus 1 % of the pixels (measured: float32 runs
  identical; bf16 1.5 % against native bf16's 1.0 %).
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from inference_helpers import image, small_cfg

HELPER = Path(__file__).resolve().parent / 'helpers' / 'emulated_cpu_run.py'
ROOT = Path(__file__).resolve().parents[1]
NORMAL = ROOT / 'configs/sapiens2/normal/sapiens2_tiny-normal_folder-256x192.py'
TASKS = ('pose', 'seg', 'normal')
# The flags of an Intel Haswell as Linux lists them (no AVX-512, no
# AVX512_BF16, no AVX-VNNI).
HASWELL_FLAGS = (
    'fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 '
    'clflush mmx fxsr sse sse2 ss syscall nx pdpe1gb rdtscp lm constant_tsc '
    'rep_good nopl xtopology cpuid pni pclmulqdq ssse3 fma cx16 pcid sse4_1 '
    'sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm '
    'abm fsgsbase bmi1 avx2 smep bmi2 erms invpcid xsaveopt')

pytestmark = pytest.mark.slow  # the emulated process takes a few minutes


def _why_not_emulated():
    """Why the emulated CPU cannot run here (None: it can)."""
    if sys.platform != 'linux' or os.uname().machine != 'x86_64':
        return 'an x86-64 Linux host emulates an x86-64 CPU'
    if shutil.which('qemu-x86_64') is None:
        return ('qemu-x86_64 is missing: apt-get install qemu-user '
                '(tools/setup_env.sh does, as root)')
    if os.getuid() != 0:
        return 'needs root for a mount namespace showing a Haswell /proc/cpuinfo'
    probe = subprocess.run(['unshare', '-m', 'true'], capture_output=True)
    if probe.returncode:
        return ('no mount namespaces here (unshare -m: '
                f'{probe.stderr.decode().strip()})')
    return None


def _haswell_cpuinfo(path: Path) -> None:
    """This machine's /proc/cpuinfo with a Haswell's model name and flags."""
    lines = []
    for line in Path('/proc/cpuinfo').read_text().splitlines():
        key = line.split(':', 1)[0].strip()
        if key == 'flags':
            line = f'flags\t\t: {HASWELL_FLAGS}'
        elif key == 'model name':
            line = 'model name\t: Intel Core Processor (Haswell, no TSX)'
        elif key in ('bugs', 'vmx flags'):
            continue
        lines.append(line)
    path.write_text('\n'.join(lines) + '\n')


def _models(folder: Path) -> None:
    """Configs and random weights of the three models, and the photo."""
    from mmengine.config import Config

    from sapiens_mm.apis import init_model
    from sapiens_mm.apis.inference import set_input_size
    pose = small_cfg('pose')
    pose.model.test_cfg.flip_test = False  # the peaks would be mirrored
    cfgs = dict(pose=pose, seg=small_cfg('seg'),
                normal=set_input_size(Config.fromfile(str(NORMAL)), (64, 48)))
    for i, (task, cfg) in enumerate(cfgs.items()):
        cfg.dump(str(folder / f'{task}.py'))
        torch.manual_seed(i)
        model = init_model(cfg)
        torch.save({'state_dict': model.state_dict(),
                    'meta': {'dataset_meta': model.dataset_meta}},
                   folder / f'{task}.pth')
    cv2.imwrite(str(folder / 'person.png'), image(60, 45, 3))


def _run(cmd, out: Path) -> str:
    out.mkdir()
    proc = subprocess.run([str(c) for c in cmd], capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    return proc.stdout + proc.stderr


def _rel_err(a, b) -> float:
    """The largest difference relative to b's largest value, over the
    values both have (the command leaves normals NaN where its seg model
    sees background)."""
    both = ~(np.isnan(a) | np.isnan(b))
    return float(np.abs(a - b)[both].max() /
                 max(np.abs(b[both]).max(), 1e-12))


def _cli_outputs(folder: Path) -> dict:
    """The command's per-task outputs for the photo."""
    pose = json.loads((folder / 'pose' / 'person.json').read_text())
    return dict(
        pose=np.asarray([p['keypoints'] for p in pose['instances']],
                        np.float32),
        seg=np.load(folder / 'seg' / 'person.npy'),
        normal=np.load(folder / 'normal' / 'person.npy'))


def test_avx2_cpu_runs_every_dtype_like_the_native_cpu(tmp_path):
    why = _why_not_emulated()
    if why:
        pytest.skip(why)
    models = tmp_path / 'models'
    models.mkdir()
    _models(models)
    cpuinfo = tmp_path / 'cpuinfo'
    _haswell_cpuinfo(cpuinfo)
    native, emulated = tmp_path / 'native', tmp_path / 'emulated'
    _run([sys.executable, HELPER, models, native], native)
    log = _run([
        'unshare', '-m', 'sh', '-c',
        'mount --bind "$1" /proc/cpuinfo && shift && exec "$@"', 'sh',
        cpuinfo, 'qemu-x86_64', '-cpu', 'Haswell', sys.executable, HELPER,
        models, emulated
    ], emulated)

    facts = json.loads((emulated / 'facts.json').read_text())
    assert facts['capability'] == 'AVX2' and not facts['cpuinfo_avx512']
    assert not facts['c_kernels'] and not facts['packed_bf16']
    # auto picks float32 on Haswell; bf16 runs, and says once that it is
    # emulated
    assert facts['auto'] == 'torch.float32'
    assert facts['dtypes']['auto'] == ['torch.float32'] * 3
    assert facts['dtypes']['bf16'] == ['torch.bfloat16'] * 3
    assert log.count("runs on PyTorch's emulated bf16 kernels") == 1
    here = json.loads((native / 'facts.json').read_text())
    assert here['dtypes']['fp32'] == ['torch.float32'] * 3

    got = np.load(emulated / 'results.npz')
    ref = np.load(native / 'results.npz')
    for task in TASKS:
        for dtype in ('fp32', 'auto'):  # both float32 on Haswell
            assert got[f'{task}_{dtype}'].shape == ref[f'{task}_fp32'].shape
            assert _rel_err(got[f'{task}_{dtype}'],
                            ref[f'{task}_fp32']) < 1e-4, (task, dtype)
        emulated_err = _rel_err(got[f'{task}_bf16'], ref[f'{task}_fp32'])
        native_err = _rel_err(ref[f'{task}_bf16'], ref[f'{task}_fp32'])
        assert emulated_err <= 3 * native_err + 0.01, (task, emulated_err,
                                                       native_err)

    cli_ref = _cli_outputs(native / 'cli_fp32')
    for dtype in ('fp32', 'auto', 'bf16'):
        cli = _cli_outputs(emulated / f'cli_{dtype}')
        cli_native = _cli_outputs(native / f'cli_{dtype}')
        for task in ('pose', 'normal'):
            assert cli[task].shape == cli_ref[task].shape
            if dtype == 'bf16':
                assert _rel_err(cli[task], cli_ref[task]) <= 3 * _rel_err(
                    cli_native[task], cli_ref[task]) + 0.01, (task, dtype)
            else:
                assert _rel_err(cli[task], cli_ref[task]) < 1e-4, (task,
                                                                   dtype)
                np.testing.assert_array_equal(np.isnan(cli[task]),
                                              np.isnan(cli_ref[task]))
        differ = float((cli['seg'] != cli_ref['seg']).mean())
        if dtype == 'bf16':
            native_differ = float((cli_native['seg'] != cli_ref['seg']).mean())
            assert differ <= 3 * native_differ + 0.01
        else:
            assert differ <= 0.01
