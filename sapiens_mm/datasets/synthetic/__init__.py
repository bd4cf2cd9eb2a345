"""Synthetic people with exact labels for every Sapiens task.

Figures made of ellipsoids and round cones are posed within joint limits,
placed in a perspective scene and ray cast with numpy.  Every sample comes
with Goliath-308 / COCO-17 keypoints (visibility from the z-buffer),
``goliath_28`` part masks, z-buffer depth and analytic normals.  See
:mod:`.render` for the camera convention and :func:`write_dataset` for the
on-disk format.
"""
from .render import render_sample
from .writer import write_dataset

__all__ = ['render_sample', 'write_dataset']
