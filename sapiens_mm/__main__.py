"""``python -m sapiens_mm``: the inference CLI (:mod:`sapiens_mm.cli.infer`;
``tools/infer.py`` runs this module too).

The package's import leaves the registration of its modules to this
program (see :mod:`sapiens_mm`): the CLI checks its arguments, then
registers everything before it loads a model.
"""
import sys

from sapiens_mm.cli.infer import cli

if __name__ == '__main__':
    # python -m sapiens_mm: runpy sets argv[0] to this file; tools/infer.py
    # keeps its own path, the name its messages use
    cli(prog='python -m sapiens_mm' if sys.argv[0] == __file__ else
        sys.argv[0])
