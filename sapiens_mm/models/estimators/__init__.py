__all__ = []
from .sapiens_dense_estimator import SapiensDenseEstimator  # noqa: E402
__all__ += ['SapiensDenseEstimator']
