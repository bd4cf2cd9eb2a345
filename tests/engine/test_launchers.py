"""The launchers (tools/dist_*.sh, tools/slurm_*.sh) run the project's
Python: $PYTHON if set, else the active virtual environment's, else the
repository's .venv, else python3. Checked on a copy of the launchers in a
fake repository, with fake interpreters (and a fake srun) that only say
who they are."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cluster_helpers import ROOT

#: Each launcher with the least arguments that start it.
LAUNCHERS = {
    'dist_infer.sh': ['2', 'in.txt'],
    'dist_test.sh': ['c.py', 'm.pth', '2'],
    'dist_train.sh': ['c.py', '2'],
    'slurm_infer.sh': ['part', 'job', 'in.txt'],
    'slurm_test.sh': ['part', 'job', 'c.py', 'm.pth'],
    'slurm_train.sh': ['part', 'job', 'c.py', 'work'],
}


def _fake(path: Path, label: str) -> Path:
    """An executable that prints ``RAN <label>`` and exits 0 (srun: its
    arguments, so the test sees which Python it was given)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('#!/bin/sh\necho "RAN ' + label + ' $*"\n')
    path.chmod(0o755)
    return path


@pytest.fixture
def repo(tmp_path):
    """A repository holding a copy of tools/*.sh, a .venv with a fake
    python, a PATH with fake python3 / python / srun, and an active
    virtual environment elsewhere."""
    tools = tmp_path / 'repo' / 'tools'
    tools.mkdir(parents=True)
    for sh in (ROOT / 'tools').glob('*.sh'):
        shutil.copy2(sh, tools / sh.name)
    bin_dir = tmp_path / 'bin'
    for name in ('python3', 'python'):
        _fake(bin_dir / name, f'PATH-{name}')
    srun = bin_dir / 'srun'
    srun.write_text('#!/bin/sh\necho "SRUN $*"\n')
    srun.chmod(0o755)
    dot_venv = _fake(tmp_path / 'repo' / '.venv' / 'bin' / 'python',
                     'DOT-VENV')
    active = _fake(tmp_path / 'active' / 'bin' / 'python', 'ACTIVE')
    env = {k: v for k, v in os.environ.items()
           if k not in ('PYTHON', 'VIRTUAL_ENV')}
    env['PATH'] = f'{bin_dir}:{env["PATH"]}'
    return dict(tools=tools, env=env, dot_venv=dot_venv, active=active,
                custom=_fake(tmp_path / 'custom' / 'py', 'CUSTOM'))


def _python_used(repo, script, **env) -> str:
    """The interpreter ``script`` started: the label it printed (for srun,
    the label of the python among srun's arguments)."""
    out = subprocess.run(
        ['bash', str(repo['tools'] / script), *LAUNCHERS[script]],
        env=dict(repo['env'], **env), capture_output=True, text=True,
        timeout=60)
    assert out.returncode == 0, out.stderr
    first = out.stdout.splitlines()[0].split()
    if first[0] == 'SRUN':
        labels = {str(repo['dot_venv']): 'DOT-VENV',
                  str(repo['active']): 'ACTIVE',
                  str(repo['custom']): 'CUSTOM', 'python3': 'PATH-python3'}
        found = [labels[a] for a in first if a in labels]
        assert len(found) == 1, first
        return found[0]
    assert first[0] == 'RAN', out.stdout
    return first[1]


@pytest.mark.parametrize('script', sorted(LAUNCHERS))
def test_launcher_picks_the_projects_python(repo, script):
    active = str(repo['active'].parents[1])
    # 1. $PYTHON wins over everything
    assert _python_used(repo, script, PYTHON=str(repo['custom']),
                        VIRTUAL_ENV=active) == 'CUSTOM'
    # 2. the active virtual environment
    assert _python_used(repo, script, VIRTUAL_ENV=active) == 'ACTIVE'
    # 3. the repository's .venv (also when VIRTUAL_ENV names a folder
    #    without a python)
    assert _python_used(repo, script) == 'DOT-VENV'
    assert _python_used(repo, script,
                        VIRTUAL_ENV=str(repo['tools'])) == 'DOT-VENV'
    # 4. python3 from PATH (never a bare `python`)
    shutil.rmtree(repo['dot_venv'].parents[1])
    assert _python_used(repo, script) == 'PATH-python3'


def test_every_launcher_is_covered():
    """Every tools/*.sh that starts Python (not setup_env.sh, which builds
    .venv, nor the sourced helpers) sources project_python.sh."""
    helpers = {'setup_env.sh', 'project_python.sh', 'sharded_common.sh'}
    scripts = {p.name for p in (ROOT / 'tools').glob('*.sh')} - helpers
    assert scripts == set(LAUNCHERS)
    for name in scripts:
        text = (ROOT / 'tools' / name).read_text()
        assert '. "${TOOLS_DIR}/project_python.sh"' in text, name
        assert 'PYTHON:-python}' not in text, name
