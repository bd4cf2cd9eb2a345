"""A copy of the repository and a throwaway virtual environment that reuses
the installed stack: what the install tests (wheel, editable) build on."""
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: What a build of the package reads from the repository.
SOURCES = ('setup.py', 'pyproject.toml', 'README.md', 'MANIFEST.in',
           'requirements.txt', 'model-index.yml', 'sapiens_mm', 'configs')


def copy_sources(dst: Path) -> Path:
    """The repository's :data:`SOURCES` copied into ``dst`` (created), with
    no caches or built configs."""
    dst.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns('__pycache__', '*.pyc', '.mim')
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, dst / name, ignore=ignore)
        else:
            shutil.copy2(path, dst / name)
    return dst


def venv_with_stack(env_dir: Path) -> Path:
    """A new virtual environment (no pip) that sees this interpreter's
    packages: its site-packages as a plain path entry of a ``.pth`` file
    (path entries do not run the ``.pth`` files inside them, so an editable
    sapiens_mm installed there stays invisible).

    Returns:
        Its interpreter.
    """
    venv.create(env_dir, system_site_packages=True, with_pip=False)
    python = env_dir / 'bin' / 'python'
    site = Path(subprocess.run(
        [str(python), '-c', 'import sysconfig; print(sysconfig.get_paths()'
         '["purelib"])'], capture_output=True, text=True, check=True,
        env={k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
    ).stdout.strip())
    stack = sysconfig.get_paths()['purelib']
    if Path(stack) != site:
        (site / 'stack.pth').write_text(stack + '\n')
    return python


def pip_into(python: Path, args, cwd: Path, env: dict):
    """``pip install`` ``args`` into the environment of ``python`` (pip of
    this interpreter, ``--python``), offline; the finished process."""
    return subprocess.run(
        [sys.executable, '-m', 'pip', '--python', str(python), 'install',
         '--no-index'] + [str(a) for a in args], cwd=cwd, env=env,
        capture_output=True, text=True, timeout=600)
