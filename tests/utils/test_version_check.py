import pytest

from sapiens_mm.utils import SUPPORTED_VERSIONS, check_versions


def test_installed_stack_is_accepted():
    check_versions()


def test_out_of_range_names_package_version_and_range():
    from importlib import metadata
    installed = metadata.version('mmengine')
    with pytest.raises(ImportError) as err:
        check_versions({'mmengine': ('mmengine', '0.11.0', '0.12.0')})
    msg = str(err.value)
    assert 'mmengine' in msg and installed in msg
    assert '>=0.11.0,<0.12.0' in msg


def test_missing_package_is_reported():
    with pytest.raises(ImportError, match='not installed'):
        check_versions({'no-such-dist-xyz': ('no_such', '1.0', '2.0')})


def test_every_required_package_is_checked():
    assert set(SUPPORTED_VERSIONS) == {
        'torch', 'mmengine', 'mmcv', 'mmpretrain', 'mmpose', 'mmsegmentation'
    }
