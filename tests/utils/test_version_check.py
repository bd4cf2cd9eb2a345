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


def test_cannot_start_message_points_at_the_projects_environment():
    """The usual cause is a Python other than the project's .venv: the
    message says how to use it, not to run the test suite."""
    with pytest.raises(ImportError) as err:
        check_versions({'no-such-dist-xyz': ('no_such', '1.0', '2.0')})
    msg = str(err.value)
    assert msg.startswith('sapiens_mm cannot start: no-such-dist-xyz')
    assert '`.venv/bin/python ...`' in msg
    assert '`source .venv/bin/activate`' in msg
    assert 'make test' not in msg
    assert '\n' not in msg
