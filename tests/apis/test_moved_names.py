"""Names that moved out of ``sapiens_mm.apis`` still import from their old
places for one release, each with a DeprecationWarning naming the new home,
and are the same objects; the old detector argument spellings of the
inferencers are still accepted (deprecated)."""
import importlib
import sys

import pytest

import sapiens_mm.apis as apis
from sapiens_mm.apis.inferencers.pose_inferencer import detector_arguments


@pytest.mark.parametrize('name,home', [
    ('build_train_cfg', 'sapiens_mm.engine.runner_cfg'),
    ('recognize_checkpoint', 'sapiens_mm.zoo'),
    ('OpenCVPersonDetector', 'sapiens_mm.detection'),
])
def test_moved_names_warn_and_resolve(name, home):
    with pytest.warns(DeprecationWarning, match=home.replace('.', r'\.')):
        obj = getattr(apis, name)
    assert obj is getattr(importlib.import_module(home), name)


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match='no attribute'):
        apis.not_a_name  # noqa: B018


@pytest.mark.parametrize('old,new', [
    ('sapiens_mm.apis.model_zoo', 'sapiens_mm.zoo'),
    ('sapiens_mm.apis.runner_cfg', 'sapiens_mm.engine.runner_cfg'),
    ('sapiens_mm.apis.curation', 'sapiens_mm.datasets.curation'),
])
def test_old_module_paths_warn(old, new):
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=new.replace('.', r'\.')):
        module = importlib.import_module(old)
    target = importlib.import_module(new)
    assert module.__all__ == target.__all__
    for name in module.__all__:
        assert getattr(module, name) is getattr(target, name)


def test_old_detector_argument_spellings():
    with pytest.warns(DeprecationWarning, match='det_model'):
        assert detector_arguments(None, None, 0, 'det.py', None, None) == (
            'det.py', None, 0)
    with pytest.warns(DeprecationWarning, match='det_cat_ids'):
        assert detector_arguments('d.py', 'd.pth', 0, None, None, 2) == (
            'd.py', 'd.pth', 2)
    with pytest.raises(ValueError, match='det_weights or det_checkpoint'):
        with pytest.warns(DeprecationWarning):
            detector_arguments(None, 'a.pth', 0, None, 'b.pth', None)
