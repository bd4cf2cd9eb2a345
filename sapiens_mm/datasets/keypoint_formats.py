"""Pose results in other keypoint layouts: COCO-17, COCO-WholeBody-133 and
the OpenPose layouts ControlNet's pre-processors consume.

A target keypoint is taken, in this order, from

1. the source keypoint of the same name (COCO-17 names are shared by all
   three Sapiens layouts; COCO-WholeBody's feet and finger joints 2-4 by
   Goliath-308),
2. for a Goliath-308 source, its alias: the same anatomical point under
   another Goliath name (hand roots = wrists, finger base joints, 16 named
   face landmarks, the pupils; listed in
   ``sapiens_mm/data/keypoint_formats.json``),
3. a derived point (OpenPose's neck: the shoulders' midpoint, scored by the
   lower of the two), or
4. nothing: the keypoint is missing, with ``(x, y) = (0, 0)`` and score 0.

The layouts (names in order) are package data, read by
:func:`~sapiens_mm.datasets.metainfo.load_keypoint_formats`.

Example:
    >>> kpts, scores = convert_keypoints(k308, s308, goliath_names, 'coco17')
    >>> kpts.shape, scores.shape
    ((N, 17, 2), (N, 17))
"""
from functools import lru_cache
from typing import Dict, List, Literal, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from sapiens_mm.utils.image_io import check_image_size

from .metainfo import load_goliath_keypoints, load_keypoint_formats

__all__ = [
    'EXPORT_FORMATS', 'KeypointMapping', 'layout_names', 'keypoint_mapping',
    'convert_keypoints', 'to_openpose', 'pose_record_arrays',
    'pose_record_canvas', 'convert_pose_record'
]

ExportFormat = Literal['coco17', 'coco_wholebody', 'openpose']
#: Formats ``--export-format`` writes.
EXPORT_FORMATS: Tuple[str, ...] = ('coco17', 'coco_wholebody', 'openpose')
#: OpenPose JSON field -> layout, in the order OpenPose writes them.
OPENPOSE_PARTS: Dict[str, str] = {
    'pose_keypoints_2d': 'openpose_body18',
    'face_keypoints_2d': 'openpose_face70',
    'hand_left_keypoints_2d': 'openpose_hand_left',
    'hand_right_keypoints_2d': 'openpose_hand_right',
}


class KeypointMapping(NamedTuple):
    """How each keypoint of a target layout comes from a source layout.

    Attributes:
        names: (M,) target keypoint names.
        index: (M, 2) int source indices averaged into each target keypoint
            (the same index twice for a copied keypoint); -1 when missing.
        kinds: (M,) ``'name'``, ``'alias'``, ``'derived'`` or ``'missing'``.
    """
    names: Tuple[str, ...]
    index: np.ndarray
    kinds: Tuple[str, ...]


def layout_names(layout: str) -> Tuple[str, ...]:
    """Keypoint names of a target layout (``'coco17'``, ``'coco_wholebody'``,
    ``'openpose_body18'``, ``'openpose_face70'``, ``'openpose_hand_left'``,
    ``'openpose_hand_right'``).

    Raises:
        ValueError: An unknown layout.
    """
    layouts = load_keypoint_formats()['layouts']
    if layout not in layouts:
        raise ValueError(f'Unknown keypoint layout {layout!r}; known: '
                         f'{", ".join(layouts)}.')
    return tuple(layouts[layout])


@lru_cache(maxsize=64)
def _mapping(source_names: Tuple[str, ...], layout: str) -> KeypointMapping:
    data = load_keypoint_formats()
    src = {name: i for i, name in enumerate(source_names)}
    goliath = [k['name'] for k in load_goliath_keypoints()['keypoints']]
    # the aliases are Goliath names: only a Goliath-308 source uses them
    aliases = data['goliath_aliases'] if list(source_names) == goliath else {}
    derived = data['derived']
    names = layout_names(layout)
    index = np.full((len(names), 2), -1, np.int64)
    kinds: List[str] = []
    for m, name in enumerate(names):
        if name in src:
            index[m], kind = src[name], 'name'
        elif aliases.get(name) in src:
            index[m], kind = src[aliases[name]], 'alias'
        elif name in derived and all(p in src for p in derived[name]):
            index[m], kind = [src[p] for p in derived[name]], 'derived'
        else:
            kind = 'missing'
        kinds.append(kind)
    index.setflags(write=False)
    return KeypointMapping(names, index, tuple(kinds))


def keypoint_mapping(source_names: Sequence[str],
                     layout: str) -> KeypointMapping:
    """The mapping from a source layout (its keypoint names in order, e.g.
    a pose model's ``dataset_meta['keypoint_id2name']`` values) to a target
    layout (see :func:`layout_names`)."""
    return _mapping(tuple(source_names), layout)


def convert_keypoints(keypoints: np.ndarray, scores: np.ndarray,
                      source_names: Sequence[str],
                      layout: str) -> Tuple[np.ndarray, np.ndarray]:
    """Convert people's keypoints to another layout.

    Args:
        keypoints: (N, K, 2) keypoints (x, y) in the source layout.
        scores: (N, K) keypoint scores.
        source_names: (K,) source keypoint names in order.
        layout: Target layout (see :func:`layout_names`).

    Returns:
        ``(keypoints, scores)``: (N, M, 2) and (N, M) float32 in the target
        layout; missing keypoints are ``(0, 0)`` with score 0.
    """
    k = len(source_names)
    kpts = np.asarray(keypoints, np.float32).reshape(-1, k, 2)
    scr = np.asarray(scores, np.float32).reshape(-1, k)
    mapping = keypoint_mapping(source_names, layout)
    a, b = mapping.index[:, 0], mapping.index[:, 1]
    missing = a < 0
    a, b = np.where(missing, 0, a), np.where(missing, 0, b)
    out_k = (kpts[:, a] + kpts[:, b]) * np.float32(0.5)
    out_s = np.minimum(scr[:, a], scr[:, b])
    out_k[:, missing] = 0
    out_s[:, missing] = 0
    return out_k, out_s


def _flat(kpts: np.ndarray, scores: np.ndarray) -> List[float]:
    return np.concatenate([kpts, scores[:, None]],
                          axis=1).reshape(-1).astype(float).tolist()


def to_openpose(keypoints: np.ndarray, scores: np.ndarray,
                source_names: Sequence[str], width: int, height: int,
                person_ids: Optional[Sequence[int]] = None) -> dict:
    """People's keypoints as an OpenPose JSON document.

    Args:
        keypoints: (N, K, 2) keypoints in pixels.
        scores: (N, K) scores.
        source_names: (K,) source keypoint names.
        width: Image (canvas) width.
        height: Image (canvas) height.
        person_ids: (N,) track IDs for OpenPose's ``person_id`` (default:
            -1, untracked).

    Returns:
        ``{'version': 1.3, 'people': [...], 'canvas_width', 'canvas_height'}``
        where each person has ``pose_keypoints_2d`` (18 x 3 values: x, y,
        score), ``face_keypoints_2d`` (70 x 3), ``hand_left_keypoints_2d``
        and ``hand_right_keypoints_2d`` (21 x 3), coordinates in pixels,
        missing points ``0, 0, 0`` (as OpenPose writes them).
    """
    parts = {
        field: convert_keypoints(keypoints, scores, source_names, layout)
        for field, layout in OPENPOSE_PARTS.items()
    }
    n = len(next(iter(parts.values()))[0])
    people = []
    for i in range(n):
        pid = -1 if person_ids is None else int(person_ids[i])
        person = {'person_id': [pid]}
        for field, (k, s) in parts.items():
            person[field] = _flat(k[i], s[i])
        people.append(person)
    return dict(version=1.3, people=people, canvas_width=int(width),
                canvas_height=int(height))


def pose_record_arrays(record: dict
                       ) -> Tuple[np.ndarray, np.ndarray, List[str]]:
    """The arrays of a pose JSON record (as the inferencer writes it).

    Returns:
        ``(keypoints, scores, names)``: (N, K, 2), (N, K) float32 and the
        (K,) keypoint names.

    Raises:
        ValueError: No ``keypoint_names``, or instances of another size.
    """
    names = record.get('keypoint_names')
    if not names:
        raise ValueError(
            'The pose record has no keypoint_names: convert the JSON the '
            'inferencer writes (OUT_DIR/pose/<name>.json).')
    k = len(names)
    kpts, scores = [], []
    for inst in record.get('instances', []):
        flat = np.asarray(inst['keypoints'], np.float32)
        if flat.size != 3 * k:
            raise ValueError(f'An instance has {flat.size} keypoint values, '
                             f'expected {3 * k} (x, y, score for {k} '
                             'keypoints).')
        flat = flat.reshape(k, 3)
        kpts.append(flat[:, :2])
        scores.append(flat[:, 2])
    return (np.asarray(kpts, np.float32).reshape(-1, k, 2),
            np.asarray(scores, np.float32).reshape(-1, k), list(names))


def pose_record_canvas(record: dict,
                       source: str = 'the pose record') -> Tuple[int, int]:
    """``(height, width)`` of the image a pose record was made from,
    checked as an image size before a canvas of it is allocated.

    The record is a file (anyone's JSON): its ``height`` / ``width`` must
    be positive integers within the image limits of
    :func:`~sapiens_mm.utils.image_io.check_image_size` (pixels and aspect
    ratio, the same budget as decoded images).

    Raises:
        ValueError: Missing or not positive integers.
        ImageTooLargeError: Over the image limits (one line: the size, the
            limit, how to raise it).
    """
    if not isinstance(record, dict):
        raise ValueError(f'{source}: not a pose record (a JSON object).')
    height, width = record.get('height'), record.get('width')
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0
               for v in (height, width)):
        raise ValueError(
            f'{source}: "height" / "width" must be the image size in '
            f'pixels (positive integers), got {height!r} / {width!r}.')
    check_image_size(width, height, f'{source}: the canvas')
    return height, width


def convert_pose_record(record: dict, fmt: ExportFormat,
                        source_names: Optional[Sequence[str]] = None) -> dict:
    """Convert one frame's pose JSON record (as the inferencer writes it to
    ``OUT_DIR/pose/<name>.json``) to an export format.

    Args:
        record: The record (``keypoint_names``, ``instances`` with flat
            ``keypoints`` ``[x, y, score] * K``, ``width``, ``height``).
        fmt: ``'coco17'`` / ``'coco_wholebody'`` (the same record schema in
            the target layout) or ``'openpose'`` (:func:`to_openpose`).
        source_names: Override of the record's ``keypoint_names``.

    Returns:
        The converted JSON document.

    Raises:
        ValueError: An unknown format, a malformed record, or (openpose)
            an image size that is not positive integers.
        ImageTooLargeError: (openpose) An image size over the image limits
            (:func:`pose_record_canvas`).
    """
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f'Unknown export format {fmt!r}; choose from '
                         f'{", ".join(EXPORT_FORMATS)}.')
    kpts, scores, names = pose_record_arrays(record)
    if source_names is not None:
        names = list(source_names)
    if fmt == 'openpose':  # a canvas size, which readers allocate
        height, width = pose_record_canvas(record)
        ids = [inst.get('track_id', -1) for inst in record.get('instances',
                                                                [])]
        return to_openpose(kpts, scores, names, width, height, ids)
    out_k, out_s = convert_keypoints(kpts, scores, names, fmt)
    doc = {k: v for k, v in record.items()
           if k not in ('instances', 'keypoint_names', 'skeleton_links')}
    doc.update(skeleton=fmt, num_keypoints=out_k.shape[1],
               keypoint_names=list(layout_names(fmt)),
               converted_from=record.get('skeleton'))
    instances = []
    for inst, k, s in zip(record.get('instances', []), out_k, out_s):
        inst = dict(inst, skeleton=fmt, keypoints=_flat(k, s),
                    keypoint_scores=s.astype(float).tolist())
        inst['score'] = float(s[s > 0].mean()) if (s > 0).any() else 0.0
        instances.append(inst)
    doc['instances'] = instances
    return doc
