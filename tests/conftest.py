import os

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
