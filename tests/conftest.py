import os

# Keep tests on few threads: CI machines have 2 cores.
os.environ.setdefault('OMP_NUM_THREADS', '2')

import pytest  # noqa: E402
import torch  # noqa: E402

import sapiens_mm  # noqa: E402,F401  (registers everything)

torch.set_num_threads(2)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
