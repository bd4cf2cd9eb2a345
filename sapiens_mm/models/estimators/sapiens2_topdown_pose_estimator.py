"""mmpose's top-down estimator, loading official Sapiens2 pose files on
every path."""
from mmpose.models.pose_estimators import TopdownPoseEstimator
from mmpose.registry import MODELS

from sapiens_mm.checkpoint import add_official_layout_hook

__all__ = ['Sapiens2TopdownPoseEstimator']


@MODELS.register_module()
class Sapiens2TopdownPoseEstimator(TopdownPoseEstimator):
    """:class:`mmpose.models.TopdownPoseEstimator` whose ``load_state_dict``
    also accepts the official Sapiens2 pose layout.

    The released pose files keep the head under ``decode_head.*``; mmpose
    names it ``head``. :mod:`sapiens_mm.checkpoint` renames the keys when it
    loads a file itself, but mmengine's Runner ``load_from`` (and any other
    non-strict ``load_state_dict``) would skip the head silently. This
    estimator registers :func:`sapiens_mm.checkpoint.add_official_layout_hook`,
    so the head loads on those paths too. Everything else is mmpose's.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        add_official_layout_hook(self)
