"""Synthetic people with exact labels for every Sapiens task.

Articulated figures made of ellipsoids and round cones (:mod:`.figure`) are
posed within joint limits, dressed, placed 1 to 3 at a time in a perspective
room / outdoor / texture scene and ray cast with vectorised numpy
(:mod:`.raycast`, :mod:`.background`, :mod:`.render`).  Every sample comes
with labels that agree exactly with each other:

* Goliath-308 and COCO-17 keypoints (the keypoints a figure does not model
  are unlabelled), visibility from the z-buffer;
* ``goliath_28`` part masks (skin parts, clothing, hair, lips);
* z-buffer depth and analytic normals in the OpenCV camera frame.

Only numpy, Pillow and tqdm are needed.  :func:`render_sample` renders one
sample in memory; :func:`write_dataset` (and ``tools/generate_synthetic.py``)
writes a train/val dataset; see :mod:`.render` for the camera convention and
:mod:`.writer` for the file format.
"""
from .figure import modelled_keypoints
from .render import render_sample
from .writer import load_sample, read_annotations, sample_seed, write_dataset

__all__ = ['render_sample', 'write_dataset', 'load_sample',
           'read_annotations', 'sample_seed', 'modelled_keypoints']
