from .version_check import SUPPORTED_VERSIONS, check_versions

__all__ = ['SUPPORTED_VERSIONS', 'check_versions']
