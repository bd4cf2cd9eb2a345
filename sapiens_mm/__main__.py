"""``python -m sapiens_mm``: the inference CLI (same as tools/infer.py)."""
from sapiens_mm.cli.infer import cli

if __name__ == '__main__':
    cli(prog='python -m sapiens_mm')
