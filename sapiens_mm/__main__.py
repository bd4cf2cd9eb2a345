"""``python -m sapiens_mm``: the inference CLI (:mod:`sapiens_mm.cli.infer`;
``tools/infer.py`` runs this module too).

The package's import leaves the registration of its modules to this
program (see :mod:`sapiens_mm`): the CLI checks its arguments, then
registers everything before it loads a model.
"""
from sapiens_mm.cli.infer import cli

if __name__ == '__main__':
    # the name the messages use: tools/infer.py gives its own (PROG)
    cli(prog=globals().get('PROG', 'python -m sapiens_mm'))
