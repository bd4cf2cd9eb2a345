import os
import sys
from pathlib import Path

# The tests mirror the package (tests/<package>/test_*.py); the helpers they
# share live in tests/helpers/ and are imported by module name.
sys.path.insert(0, str(Path(__file__).resolve().parent / 'helpers'))

# Tests run tiny models, where extra threads only add overhead (and on a
# shared 2-core machine, heavy contention): one thread, subprocesses too.
os.environ.setdefault('OMP_NUM_THREADS', '1')

import pytest  # noqa: E402
import torch  # noqa: E402

import sapiens_mm  # noqa: E402,F401  (registers everything)

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
