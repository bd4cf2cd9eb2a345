"""``python -m sapiens_mm``: the inference CLI (same as tools/infer.py)."""
from sapiens_mm.apis.infer_cli import main

if __name__ == '__main__':
    main(prog='python -m sapiens_mm')
