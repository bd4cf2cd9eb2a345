"""Import a script of tools/ as a module, so that tests call its main()
in-process (a subprocess would pay the torch / OpenMMLab import again)."""
import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_tool(name: str) -> ModuleType:
    """``tools/<name>.py`` as a module (its ``__main__`` block does not
    run); ``name`` may have a folder, e.g. ``'analysis/benchmark'``."""
    spec = importlib.util.spec_from_file_location(
        'tools_' + name.replace('/', '_'),
        ROOT / 'tools' / f'{name}.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
