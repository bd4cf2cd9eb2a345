"""Building blocks of the inferencers: input sources, prefetching, writers
and windows. The person detectors of top-down pose live in
:mod:`sapiens_mm.detection`."""
from .display import StopRequested, display_problem, show_images
from .prefetch import in_background
from .sources import (Frame, Source, check_array, collect_sources,
                      count_frames, is_glob, is_list_file, iter_frames,
                      iter_sources, unique_names)
from .writers import VideoWriters, write_json, write_npy, write_png

__all__ = [
    'in_background', 'Source', 'unique_names', 'Frame', 'check_array',
    'collect_sources', 'iter_frames', 'count_frames', 'iter_sources',
    'is_list_file', 'is_glob', 'VideoWriters',
    'write_json', 'write_npy', 'write_png', 'StopRequested', 'show_images',
    'display_problem'
]
