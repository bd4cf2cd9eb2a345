"""Building blocks of the inferencers: input sources, prefetching, writers,
windows and the person detectors of top-down pose."""
from .display import StopRequested, display_problem, show_images
from .person_detector import (MMDetPersonDetector, OpenCVFaceDetector,
                              OpenCVPersonDetector, PersonDetector,
                              boxes_per_input, build_person_detector,
                              check_boxes, filter_boxes, nms,
                              select_person_boxes, whole_image_box)
from .prefetch import in_background
from .sources import (Frame, Source, check_array, collect_sources,
                      count_frames, iter_frames, unique_names)
from .writers import VideoWriters, write_json, write_npy, write_png

__all__ = [
    'PersonDetector', 'OpenCVPersonDetector', 'OpenCVFaceDetector',
    'MMDetPersonDetector',
    'build_person_detector', 'nms', 'filter_boxes', 'select_person_boxes',
    'whole_image_box', 'boxes_per_input', 'check_boxes', 'in_background',
    'Source', 'unique_names',
    'Frame', 'check_array', 'collect_sources', 'iter_frames', 'count_frames',
    'VideoWriters', 'write_json', 'write_npy', 'write_png', 'StopRequested',
    'show_images', 'display_problem'
]
