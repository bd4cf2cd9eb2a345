"""A synthetic video of people, for end-to-end speed measurements.

:func:`write_video` renders ``unique_frames`` scenes with
:func:`~sapiens_mm.datasets.synthetic.render.render_sample` (each with
``min_people``..``max_people`` people) and writes ``num_frames`` frames that
cycle through them to an ``.mp4`` (OpenCV's ``mp4v`` codec). The scenes are
independent (the people do not move from frame to frame): the video is made
to time a pipeline on realistic frame sizes and person counts, not to test
tracking. The person boxes of every frame are returned.
"""
from multiprocessing import get_context
from pathlib import Path
from typing import Dict, List, Tuple, Union

import numpy as np

from .render import render_sample

__all__ = ['write_video']

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


def write_video(path: Union[str, Path],
                num_frames: int,
                size: Tuple[int, int] = (1080, 1920),
                min_people: int = 1,
                max_people: int = 5,
                unique_frames: int = 8,
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
            ``i % unique_frames`` (rendering 1080p scenes is the slow part).
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
    import cv2
    if num_frames < 1 or unique_frames < 1:
        raise ValueError(f'num_frames and unique_frames must be >= 1, got '
                         f'{num_frames} and {unique_frames}.')
    if not 1 <= min_people <= max_people:
        raise ValueError(f'Need 1 <= min_people <= max_people, got '
                         f'{min_people} and {max_people}.')
    height, width = int(size[0]), int(size[1])
    if height < 16 or width < 16:
        raise ValueError(f'size must be at least 16 x 16, got {size}.')
    tasks = [(int(seed), i, (height, width), int(min_people), int(max_people))
             for i in range(min(unique_frames, num_frames))]
    if num_workers > 0:
        with get_context().Pool(num_workers) as pool:
            scenes = pool.map(_render, tasks)
    else:
        scenes = [_render(t) for t in tasks]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*'mp4v'),
                             float(fps), (width, height))
    if not writer.isOpened():
        raise RuntimeError(f'OpenCV cannot write the video {path} (mp4v).')
    boxes: List[np.ndarray] = []
    try:
        for i in range(num_frames):
            frame, frame_boxes = scenes[i % len(scenes)]
            writer.write(frame)
            boxes.append(frame_boxes)
    finally:
        writer.release()
    return dict(path=str(path), num_frames=num_frames, size=(height, width),
                fps=float(fps), boxes=boxes)
