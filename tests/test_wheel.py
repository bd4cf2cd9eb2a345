"""The package as a user installs it: a wheel built from the repository,
installed (no deps) into a fresh virtual environment outside the checkout
that reuses the installed OpenMMLab stack. From there the CLI, checkpoint
recognition (which needs the shipped configs) and a tiny-model inference
on an image work."""
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import venv
from pathlib import Path

import cv2
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ('setup.py', 'pyproject.toml', 'README.md', 'MANIFEST.in',
           'requirements.txt', 'model-index.yml', 'sapiens_mm', 'configs')

pytestmark = pytest.mark.slow  # wheel build + venv + three interpreters


def _run(cmd, cwd, env, timeout=600):
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (cmd, proc.stdout[-2000:],
                                  proc.stderr[-3000:])
    return proc.stdout


@pytest.fixture(scope='module')
def installed(tmp_path_factory):
    """(python of the fresh venv, a work folder outside the checkout, the
    environment to run it in)."""
    tmp = tmp_path_factory.mktemp('wheel')
    src = tmp / 'src'  # a copy: the build writes nothing into the checkout
    src.mkdir()
    ignore = shutil.ignore_patterns('__pycache__', '*.pyc', '.mim')
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore)
        else:
            shutil.copy2(path, src / name)
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
    dist = tmp / 'dist'
    _run([sys.executable, '-m', 'pip', 'wheel', '--no-deps',
          '--no-build-isolation', '--no-index', '-w', dist, src], tmp, env)
    (wheel, ) = dist.glob('sapiens_mm-*.whl')

    env_dir = tmp / 'venv'
    venv.create(env_dir, system_site_packages=True, with_pip=False)
    python = env_dir / 'bin' / 'python'
    site = Path(_run([python, '-c', 'import sysconfig; print(sysconfig.'
                      'get_paths()["purelib"])'], tmp, env).strip())
    # The stack (torch, mmcv, mmpose, ...) of this interpreter: its
    # site-packages as a plain path entry. Path entries of a .pth file do
    # not run the .pth files inside them, so an editable sapiens_mm there
    # stays invisible.
    stack = sysconfig.get_paths()['purelib']
    if Path(stack) != site:
        (site / 'stack.pth').write_text(stack + '\n')
    _run([sys.executable, '-m', 'pip', '--python', python, 'install',
          '--no-deps', '--no-index', wheel], tmp, env)
    work = tmp / 'work'
    work.mkdir()
    return python, work, env, env_dir


def test_installed_package_is_the_wheel(installed):
    python, work, env, env_dir = installed
    out = _run([python, '-c', textwrap.dedent('''
        import sapiens_mm
        from sapiens_mm.zoo import recognize_checkpoint
        from sapiens_mm.zoo.model_zoo import config_root
        print(sapiens_mm.__file__)
        print(config_root())
        info = recognize_checkpoint(
            'sapiens_0.3b_goliath_best_goliath_AP_573.pth')
        print(info.task, info.size, info.dataset, info.config)
        cfg = sapiens_mm.get_config('sapiens_0.3b-210e_goliath-1024x768')
        print(cfg.model.backbone.arch, cfg.data_mode)
        from sapiens_mm.zoo.cards import find_card, model_index_path
        print(model_index_path(), find_card('sapiens2-pose-0.4b').config)
        from sapiens_mm.utils.cpu_features import cpu_kernels_supported
        from sapiens_mm.utils.cpu_kernels import cpu_kernel
        print(cpu_kernels_supported(),
              cpu_kernel('sapiens_attention_f32') is not None)
        ''')], work, dict(env, SAPIENS_MM_CACHE=str(work / 'cache'))
               ).splitlines()
    package, root, recognised, arch, registry, kernels = out[-6:]
    assert Path(package).is_relative_to(env_dir)
    assert not Path(package).is_relative_to(ROOT)
    assert Path(root).is_relative_to(env_dir) and root.endswith(
        os.path.join('sapiens_mm', '.mim', 'configs'))
    task, size, dataset, config = recognised.split()
    assert (task, size, dataset) == ('pose', '0.3b', 'goliath')
    assert Path(config) == Path(root) / \
        'pose/goliath/sapiens_0.3b-210e_goliath-1024x768.py'
    assert arch == 'sapiens_0.3b topdown'
    index, card_config = registry.split()
    assert Path(index) == Path(root).parent / 'model-index.yml'
    assert Path(card_config) == Path(root) / \
        'sapiens2/pose/sapiens2_0.4b-goliath-1024x768.py'
    # the C kernels build from the sources and headers the wheel ships
    # (into a fresh cache) wherever the CPU has the instructions
    has_bf16, built = kernels.split()
    assert built == has_bf16


def test_cli_help_and_tiny_inference(installed):
    python, work, env, _ = installed
    text = _run([python, '-m', 'sapiens_mm', '--help'], work, env)
    assert 'usage: python -m sapiens_mm' in text and '--checkpoints' in text
    img = np.random.default_rng(0).integers(0, 255, (40, 30, 3), np.uint8)
    cv2.imwrite(str(work / 'person.png'), img)
    # an official-style name: recognised, built from the shipped config
    _run([python, '-c', textwrap.dedent('''
        import torch
        from sapiens_mm.apis import init_model
        from sapiens_mm.zoo import shipped_config
        model = init_model(shipped_config('depth', 'tiny'))
        torch.save({'state_dict': model.state_dict()},
                   'sapiens_tiny_render_people_epoch_1.pth')
        ''')], work, env)
    _run([python, '-m', 'sapiens_mm', 'person.png', '--checkpoints',
          'sapiens_tiny_render_people_epoch_1.pth', '--out-dir', 'out',
          '--device', 'cpu', '--no-progress'], work, env)
    depth = np.load(work / 'out' / 'depth' / 'person.npy')
    assert depth.shape == (40, 30) and np.isfinite(depth).all()
    vis = cv2.imread(str(work / 'out' / 'depth' / 'person.png'))
    # the depth picture at the image's size, its colour bar beside it
    assert vis.shape[0] == 40 and vis.shape[1] > 30 and vis.shape[2] == 3
