"""``python -m sapiens_mm``: the inference CLI (same as tools/infer.py)."""
from sapiens_mm.apis.infer_cli import cli

if __name__ == '__main__':
    cli(prog='python -m sapiens_mm')
