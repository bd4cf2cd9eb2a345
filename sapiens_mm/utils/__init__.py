from .package_origin import check_package_origin

check_package_origin()  # first: nothing works in a shadowed package

from .version_check import SUPPORTED_VERSIONS, check_versions  # noqa: E402

__all__ = ['SUPPORTED_VERSIONS', 'check_versions']
