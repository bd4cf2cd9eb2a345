"""Commands the package prints for its user to run, written so that they run
as printed."""
import os
import os.path as osp
import sys

__all__ = ['python_command']


def python_command() -> str:
    """How to start the Python that runs this code, from the current folder:
    the interpreter of a virtual environment by its path (relative to the
    current folder when it lies below it, e.g. ``.venv/bin/python``), which
    works whether or not the environment is activated; ``python`` outside a
    virtual environment."""
    if sys.prefix == sys.base_prefix or not sys.executable:
        return 'python'
    # the venv's own path, not the interpreter its link points to
    path = osp.abspath(sys.executable)
    rel = osp.relpath(path)
    return rel if not rel.startswith(os.pardir) else path
