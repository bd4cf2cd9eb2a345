"""The Python API keeps mmseg's and mmpose's notes on building models out of
the user's console, inside scopes of its own calls: the user's warning
filters are the same before and after, and a caller that asks to see them
(``upstream_warnings_shown``, the CLI's ``--verbose``) does."""
import warnings

from tiny_configs import TINY

from sapiens_mm.apis import SapiensInferencer
from sapiens_mm.utils.upstream_warnings import upstream_warnings_shown


def _build_and_record():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')  # the user wants every warning
        before = list(warnings.filters)
        SapiensInferencer({'seg': str(TINY['seg']), 'pose': str(TINY['pose'])},
                          device='cpu', detector='none')
        after = list(warnings.filters)
    return [str(w.message) for w in caught], before, after


def test_sapiens_inferencer_hides_upstream_notes_in_its_own_scope():
    messages, before, after = _build_and_record()
    assert not [m for m in messages if 'build_loss' in m
                or 'metainfo config file' in m], messages
    assert after == before
    with upstream_warnings_shown():
        shown, _, _ = _build_and_record()
    assert [m for m in shown if 'build_loss' in m], shown
