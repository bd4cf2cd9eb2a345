import os
import sys
from pathlib import Path

# The tests mirror the package (tests/<package>/test_*.py); the helpers they
# share live in tests/helpers/ and are imported by module name.
sys.path.insert(0, str(Path(__file__).resolve().parent / 'helpers'))

# Tests run tiny models, where extra threads only add overhead (and on a
# shared 2-core machine, heavy contention): one thread, subprocesses too.
os.environ.setdefault('OMP_NUM_THREADS', '1')

# huggingface_hub reads HF_HUB_OFFLINE once, when imported: imported before
# the session goes offline (below), it stays able to reach the loopback Hub
# of the tests that unset HF_HUB_OFFLINE (sapiens_mm reads it at each call).
for _var in ('HF_HUB_OFFLINE', 'TRANSFORMERS_OFFLINE'):
    os.environ.pop(_var, None)
import huggingface_hub  # noqa: E402,F401
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


@pytest.fixture(autouse=True, scope='session')
def _hermetic_hub(tmp_path_factory):
    """No test reaches the real Hugging Face Hub: the session (and its
    subprocesses) is offline with an empty private cache, so a default that
    would download (the RTMDet-m person detector) falls back. Tests of
    downloads unset HF_HUB_OFFLINE and point HF_ENDPOINT at a loopback Hub
    through monkeypatch."""
    names = ('HF_HUB_OFFLINE', 'HF_HOME', 'HF_HUB_CACHE', 'HF_ENDPOINT',
             'HF_TOKEN')
    old = {k: os.environ.get(k) for k in names}
    for k in names:
        os.environ.pop(k, None)
    os.environ['HF_HUB_OFFLINE'] = '1'
    os.environ['HF_HOME'] = str(tmp_path_factory.mktemp('hf_home'))
    yield
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _drop_the_tests_loggers():
    """Loggers a test creates (a Runner's, a CLI's) write to the streams
    pytest captured for that test, which close when it ends: afterwards they
    leave mmengine's registry of loggers, so that the 'current' logger of
    later tests is one whose stream is still open (else their warnings end
    in "--- Logging error ---" on stderr)."""
    from mmengine.logging import MMLogger
    before = set(MMLogger._instance_dict)
    yield
    for name in list(MMLogger._instance_dict):
        if name not in before:
            MMLogger._instance_dict.pop(name)
