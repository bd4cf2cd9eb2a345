"""The editable install of tools/setup_env.sh beside the most common
newcomer layout: the clone at ``x/sapiens_mm/`` and a script at ``x/test.py``.
Python then sees the clone's folder as a namespace package named
sapiens_mm; the install must put the real package first (the checkout on
``sys.path``), and an install that does not (setuptools' default editable
mode, an import hook after the path) must say so in one line instead of
failing deep in mmpretrain.

Each case: a copy of the repository named like the clone, a throwaway
virtual environment that reuses this interpreter's stack (its
site-packages as a plain path entry, so this checkout's own editable
install stays invisible), and the install command of the set-up script."""
import os
import re
import shlex
import subprocess
import textwrap
from pathlib import Path

import pytest
from venv_helpers import ROOT, copy_sources, pip_into, venv_with_stack

pytestmark = pytest.mark.slow  # venvs, editable installs, interpreters

SCRIPT = textwrap.dedent('''
    import sapiens_mm
    print('package', sapiens_mm.__file__)
    from sapiens_mm.apis import SapiensInferencer
    from mmpretrain.registry import MODELS
    print('registered', MODELS.get('SapiensVisionTransformer') is not None)
    ''')


def setup_install_args() -> list:
    """The arguments of the editable install in tools/setup_env.sh, after
    ``pipq install`` (``$ROOT`` as written)."""
    text = (ROOT / 'tools/setup_env.sh').read_text()
    (line, ) = [ln for ln in text.splitlines()
                if re.match(r'^\s*pipq install .*-e "\$ROOT"', ln)]
    return shlex.split(line.split('pipq install', 1)[1])


def _run(cmd, cwd, env):
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def _clone_and_venv(tmp: Path, install_args: list):
    """``tmp/x/sapiens_mm`` (the repository's files), a venv with the
    stack, sapiens_mm installed into it by ``install_args``."""
    clone = copy_sources(tmp / 'x' / 'sapiens_mm')
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
    python = venv_with_stack(tmp / 'venv')
    args = [str(clone) if a == '$ROOT' else a for a in install_args]
    proc = pip_into(python, args, tmp, env)
    assert proc.returncode == 0, (args, proc.stderr[-3000:])
    (clone.parent / 'test.py').write_text(SCRIPT)
    return python, clone, env


def test_a_script_beside_the_clone_imports_the_real_package(tmp_path):
    args = setup_install_args()
    assert '--config-settings' in args and 'editable_mode=compat' in args
    python, clone, env = _clone_and_venv(tmp_path, args)
    proc = _run([python, 'test.py'], clone.parent, env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f'package {clone / "sapiens_mm" / "__init__.py"}' in proc.stdout
    assert 'registered True' in proc.stdout


def test_a_shadowed_package_says_so_in_one_line(tmp_path):
    """setuptools' default editable mode (an import hook after the path):
    the clone's folder wins as a namespace package; the first module of
    ours to load says what happened and what to do."""
    args = [a for a in setup_install_args()
            if a not in ('--config-settings', 'editable_mode=compat')]
    python, clone, env = _clone_and_venv(tmp_path, args)
    proc = _run([python, 'test.py'], clone.parent, env)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f'ImportError: sapiens_mm is shadowed by the '
                           f'folder {clone}'), proc.stderr[-3000:]
    assert 'tools/setup_env.sh' in last
