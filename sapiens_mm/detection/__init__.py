"""Person detectors: the boxes of top-down pose and of data curation."""
from .person_detector import (
                              MMDetPersonDetector,
                              OpenCVFaceDetector,
                              OpenCVPersonDetector,
                              PersonDetector,
                              boxes_per_input,
                              build_person_detector,
                              check_boxes,
                              filter_boxes,
                              nms,
                              select_person_boxes,
                              whole_image_box,
)

__all__ = [
    'PersonDetector', 'OpenCVPersonDetector', 'OpenCVFaceDetector',
    'MMDetPersonDetector', 'build_person_detector', 'nms', 'filter_boxes',
    'select_person_boxes', 'whole_image_box', 'boxes_per_input',
    'check_boxes'
]
