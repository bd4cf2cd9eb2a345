"""Synthetic videos of people: for end-to-end speed measurements, and two
people crossing for tracking tests.

:func:`write_video` renders ``unique_frames`` scenes with
:func:`~sapiens_mm.datasets.synthetic.render.render_sample` (each with
``min_people``..``max_people`` people) and writes ``num_frames`` frames that
cycle through them to an ``.mp4`` (OpenCV's ``mp4v`` codec). The scenes are
independent (the people do not move from frame to frame): the video is made
to time a pipeline on realistic frame sizes and person counts, not to test
tracking. The person boxes of every frame are returned.

:func:`write_crossing_video` renders two people walking past each other at
different speeds (one hiding the other while they cross), with each
person's box and keypoints in every frame: the test of track IDs.
"""
from multiprocessing import get_context
from pathlib import Path
from typing import Dict, List, Tuple, Union

import numpy as np

from .render import render_sample

__all__ = ['write_video', 'write_crossing_video']

# Seed stream of video scenes: datasets use 0 (train) and 1 (val).
_VIDEO_STREAM = 2


def _render(task: Tuple[int, int, Tuple[int, int], int, int]):
    seed, index, size, min_people, max_people = task
    sample = render_sample(
        np.random.SeedSequence([seed, _VIDEO_STREAM, index]), size=size,
        max_people=max_people, min_people=min_people)
    boxes = np.array([[x, y, x + w, y + h] for x, y, w, h in
                      (p['bbox'] for p in sample['people'])],
                     np.float32).reshape(-1, 4)
    return sample['image'][:, :, ::-1].copy(), boxes  # RGB -> BGR


def _video_writer(path: Union[str, Path], fps: float, width: int,
                  height: int):
    """An OpenCV ``mp4v`` writer of ``path`` (its folder created).

    Raises:
        RuntimeError: OpenCV cannot write the file.
    """
    import cv2
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*'mp4v'),
                             float(fps), (width, height))
    if not writer.isOpened():
        raise RuntimeError(f'OpenCV cannot write the video {path} (mp4v).')
    return writer


def write_video(path: Union[str, Path],
                num_frames: int,
                size: Tuple[int, int] = (1080, 1920),
                min_people: int = 1,
                max_people: int = 5,
                unique_frames: int = 8,
                frames_per_scene: int = 1,
                fps: float = 30.0,
                seed: int = 0,
                num_workers: int = 0) -> Dict[str, object]:
    """Render a synthetic video.

    Args:
        path: Output ``.mp4`` file (its folder is created).
        num_frames: Frames written.
        size: ``(height, width)``. Defaults to 1080p.
        min_people: Fewest people placed per scene.
        max_people: Most people placed per scene.
        unique_frames: Scenes rendered; frame ``i`` shows scene
            ``(i // frames_per_scene) % unique_frames`` (rendering 1080p
            scenes is the slow part).
        frames_per_scene: Consecutive frames that show the same scene (a
            still shot; a person detector run every N frames then finds
            the people it would have found on every frame).
        fps: Frame rate written in the file.
        seed: The same seed gives the same scenes.
        num_workers: Worker processes rendering scenes (0: this process).

    Returns:
        dict: ``path``, ``num_frames``, ``size``, ``fps`` and ``boxes``: one
        (N, 4) float32 array of person boxes (x1, y1, x2, y2, pixels) per
        frame; a placed person that is fully hidden has no box.

    Raises:
        ValueError: Bad counts or sizes.
        RuntimeError: OpenCV cannot write the file.
    """
    if min(num_frames, unique_frames, frames_per_scene) < 1:
        raise ValueError(f'num_frames, unique_frames and frames_per_scene '
                         f'must be >= 1, got {num_frames}, {unique_frames} '
                         f'and {frames_per_scene}.')
    if not 1 <= min_people <= max_people:
        raise ValueError(f'Need 1 <= min_people <= max_people, got '
                         f'{min_people} and {max_people}.')
    height, width = int(size[0]), int(size[1])
    if height < 16 or width < 16:
        raise ValueError(f'size must be at least 16 x 16, got {size}.')
    scenes_shown = -(-num_frames // frames_per_scene)
    tasks = [(int(seed), i, (height, width), int(min_people), int(max_people))
             for i in range(min(unique_frames, scenes_shown))]
    if num_workers > 0:
        with get_context().Pool(num_workers) as pool:
            scenes = pool.map(_render, tasks)
    else:
        scenes = [_render(t) for t in tasks]
    writer = _video_writer(path, fps, width, height)
    boxes: List[np.ndarray] = []
    try:
        for i in range(num_frames):
            frame, frame_boxes = scenes[(i // frames_per_scene) %
                                        len(scenes)]
            writer.write(frame)
            boxes.append(frame_boxes)
    finally:
        writer.release()
    return dict(path=str(path), num_frames=num_frames, size=(height, width),
                fps=float(fps), boxes=boxes)


def _person_sprite(seed: int, index: int, height: int):
    """One rendered person, upright (a walker: at least 1.8 times as tall as
    wide; the first such of up to 8 renders), cut out of its scene and
    scaled to ``height`` pixels: (BGR image, (h, w) bool mask, (17, 3) COCO
    keypoints (x, y, v) in sprite pixels)."""
    import cv2
    for attempt in range(8):
        sample = render_sample(
            np.random.SeedSequence(
                [seed, _VIDEO_STREAM + 1, index, attempt]),
            size=(256, 192), max_people=1, min_people=1,
            background='texture')
        person = sample['people'][0]
        x, y, w, h = person['bbox']
        if h >= 1.8 * w:
            break
    mask = sample['instance'][y:y + h, x:x + w] == 0
    image = sample['image'][y:y + h, x:x + w, ::-1]
    scale = height / h
    out_w = max(1, int(round(w * scale)))
    image = cv2.resize(np.ascontiguousarray(image), (out_w, height),
                       interpolation=cv2.INTER_AREA)
    mask = cv2.resize(mask.astype(np.uint8), (out_w, height),
                      interpolation=cv2.INTER_NEAREST).astype(bool)
    kpts = np.asarray(person['keypoints_coco'], np.float64).copy()
    # pixel centres: pixel i spans [i, i + 1) before and after scaling
    kpts[:, :2] = (kpts[:, :2] - (x, y) + 0.5) * scale - 0.5
    return image, mask, kpts


def write_crossing_video(path: Union[str, Path],
                         num_frames: int = 40,
                         size: Tuple[int, int] = (240, 320),
                         speeds: Tuple[float, float] = (5.0, -3.0),
                         heights: Tuple[float, float] = (0.8, 0.6),
                         fps: float = 10.0,
                         seed: int = 0) -> Dict[str, object]:
    """Render a video of two people walking past each other, to test that
    track IDs stay with their person.

    Two rendered upright people (:func:`render_sample`, cut out of their
    scenes) slide horizontally over a still texture background: person 0
    from the left edge to the right at ``speeds[0]`` pixels per frame,
    person 1 from the right edge to the left at ``|speeds[1]|``; person 0
    is taller (nearer: its feet lower in the frame) and drawn in front, so
    it hides person 1 while they cross.

    Args:
        path: Output ``.mp4`` file (its folder is created).
        num_frames: Frames written.
        size: ``(height, width)``.
        speeds: Horizontal speed of each person, pixels per frame (positive:
            rightwards).
        heights: Height of each person as a fraction of the frame height.
        fps: Frame rate written in the file.
        seed: The same seed gives the same video.

    Returns:
        dict: ``path``, ``num_frames``, ``size``, ``fps``, ``boxes``: a
        (num_frames, 2, 4) float32 array of each person's box (x1, y1, x2,
        y2, pixels; the whole person, occluded parts included, clipped to
        the frame) and ``keypoints``: (num_frames, 2, 17, 3) float32 COCO
        keypoints (x, y, v) of each person (v = 0: unlabelled or outside
        the frame; occlusion by the other person is not marked).

    Raises:
        ValueError: Bad counts or sizes.
        RuntimeError: OpenCV cannot write the file.
    """
    from .background import texture
    height, width = int(size[0]), int(size[1])
    if num_frames < 2 or height < 32 or width < 32:
        raise ValueError(f'Need num_frames >= 2 and a size of at least '
                         f'32 x 32, got {num_frames} and {size}.')
    if not all(0.1 <= h <= 1.0 for h in heights):
        raise ValueError(f'heights are fractions of the frame height in '
                         f'[0.1, 1], got {heights}.')
    background = texture(np.random.default_rng([seed, _VIDEO_STREAM + 1]),
                         height, width)
    background = np.round(background.transpose(1, 2, 0)[..., ::-1] *
                          255).astype(np.uint8)
    sprites = [_person_sprite(seed, i, int(round(h * height)))
               for i, h in enumerate(heights)]
    feet = (height - 2, int(round(height * 0.9)))  # bottom row of each
    starts = (0.0, float(width - sprites[1][0].shape[1]))
    writer = _video_writer(path, fps, width, height)
    boxes = np.zeros((num_frames, 2, 4), np.float32)
    keypoints = np.zeros((num_frames, 2, 17, 3), np.float32)
    try:
        for f in range(num_frames):
            frame = background.copy()
            for p in (1, 0):  # person 0 in front
                img, mask, kpts = sprites[p]
                h, w = mask.shape
                x0 = int(round(starts[p] + speeds[p] * f))
                y0 = feet[p] - h + 1
                # the part of the sprite inside the frame
                sx0, sx1 = max(0, -x0), min(w, width - x0)
                sy0, sy1 = max(0, -y0), min(h, height - y0)
                if sx0 < sx1 and sy0 < sy1:
                    region = frame[y0 + sy0:y0 + sy1, x0 + sx0:x0 + sx1]
                    m = mask[sy0:sy1, sx0:sx1]
                    region[m] = img[sy0:sy1, sx0:sx1][m]
                boxes[f, p] = (max(0, x0), max(0, y0), min(width, x0 + w),
                               min(height, y0 + h))
                k = kpts.copy()
                k[:, 0] += x0
                k[:, 1] += y0
                outside = ((k[:, 0] < 0) | (k[:, 0] > width - 1) |
                           (k[:, 1] < 0) | (k[:, 1] > height - 1))
                k[outside, 2] = 0
                keypoints[f, p] = k
            writer.write(frame)
    finally:
        writer.release()
    return dict(path=str(path), num_frames=num_frames, size=(height, width),
                fps=float(fps), boxes=boxes, keypoints=keypoints)
