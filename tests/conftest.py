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


@pytest.fixture(autouse=True, scope='session')
def _pt2_trust_store(tmp_path_factory):
    """The .pt2 files tests export are trusted in a store of the test
    session (subprocesses inherit it), never in the user's own."""
    old = os.environ.get('SAPIENS_MM_TRUST_STORE')
    os.environ['SAPIENS_MM_TRUST_STORE'] = str(
        tmp_path_factory.mktemp('pt2_trust') / 'trusted_pt2.json')
    yield
    if old is None:
        os.environ.pop('SAPIENS_MM_TRUST_STORE', None)
    else:
        os.environ['SAPIENS_MM_TRUST_STORE'] = old


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
