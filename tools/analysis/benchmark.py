"""Speed of a Sapiens model against the limit of this machine.

    python tools/analysis/benchmark.py --arch sapiens_0.3b --compare-stock
    python tools/analysis/benchmark.py --arch sapiens_0.3b --end-to-end photos/

See ``--help`` and :mod:`sapiens_mm.apis.benchmark`.
"""
from sapiens_mm.apis.benchmark import main

if __name__ == '__main__':
    main(prog='tools/analysis/benchmark.py',
         echo=lambda text: print(text, flush=True))
