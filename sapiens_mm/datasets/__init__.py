from . import transforms  # noqa: F401
from .metainfo import (body_part_label_map, load_body_part_classes,
                       load_goliath_keypoints)

__all__ = ['load_body_part_classes', 'load_goliath_keypoints',
           'body_part_label_map']
from .body_part_seg_dataset import BodyPartSegDataset, goliath_34_to_28_label_map  # noqa: E402,E501
from .cihp_body_part_dataset import CIHPBodyPartDataset  # noqa: E402
from .lip_body_part_dataset import LIPBodyPartDataset  # noqa: E402
__all__ += ['BodyPartSegDataset', 'LIPBodyPartDataset', 'CIHPBodyPartDataset',
            'goliath_34_to_28_label_map']
from .dense_folder_dataset import DenseFolderDataset  # noqa: E402
from .depth_folder_dataset import DepthFolderDataset  # noqa: E402
from .normal_folder_dataset import NormalFolderDataset  # noqa: E402
from .pointmap_folder_dataset import PointmapFolderDataset  # noqa: E402
from .albedo_folder_dataset import AlbedoFolderDataset  # noqa: E402
from .matting_folder_dataset import MattingFolderDataset  # noqa: E402
__all__ += ['DenseFolderDataset', 'DepthFolderDataset', 'NormalFolderDataset',
            'PointmapFolderDataset', 'AlbedoFolderDataset',
            'MattingFolderDataset']
from .coco_annotations import (  # noqa: E402
    AnnotationFileError, CheckedCocoAnnotationsMixin, CheckedCocoDataset,
    CheckedCocoWholeBodyDataset, check_coco_keypoint_annotations,
    check_detection_results)
__all__ += ['AnnotationFileError', 'CheckedCocoAnnotationsMixin',
            'CheckedCocoDataset', 'CheckedCocoWholeBodyDataset',
            'check_coco_keypoint_annotations', 'check_detection_results']
from .goliath_dataset import GoliathDataset  # noqa: E402
from .metainfo_goliath import (  # noqa: E402
    GOLIATH_GROUPS, coco_wholebody_to_goliath, goliath_keypoint_groups,
    goliath_keypoints_from_annotation, goliath_metainfo)
__all__ += ['GoliathDataset', 'GOLIATH_GROUPS', 'goliath_metainfo',
            'goliath_keypoint_groups', 'coco_wholebody_to_goliath',
            'goliath_keypoints_from_annotation']
from .unlabeled_image_dataset import UnlabeledImageDataset  # noqa: E402
__all__ += ['UnlabeledImageDataset']
