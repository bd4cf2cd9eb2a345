"""Write a synthetic dataset to disk (images, masks, depth, normals, COCO).

Layout (``<split>`` is ``train`` and ``val``, stems are ``000000``, ...)::

    <out>/<split>/images/<stem>.png         RGB uint8 (H, W, 3)
    <out>/<split>/masks/<stem>.png          uint8 (H, W) goliath_28 class ids
    <out>/<split>/depths/<stem>.npy         float32 (H, W) camera z, 0 = bg
    <out>/<split>/normals/<stem>.npy        float32 (H, W, 3) unit, 0 = bg
    <out>/<split>/annotations/goliath_308.json   COCO keypoints, 308 points
    <out>/<split>/annotations/coco_17.json       COCO keypoints, 17 points

With ``matting=True`` the people get soft edges (see
:func:`~.render.render_sample`'s ``soft_edges``) and each split also has
the matting ground truth read by ``MattingFolderDataset``::

    <out>/<split>/alphas/<stem>.png         uint16 (H, W) alpha * 65535
    <out>/<split>/fgs/<stem>.png            RGB uint8 foreground
    <out>/<split>/bgs/<stem>.png            RGB uint8 background

COCO JSON (both files share images, ids, boxes and areas):

* ``images``: ``{id: i + 1, file_name: "<stem>.png" (relative to images/),
  height, width, cam_K: 3x3 intrinsics}``;
* ``annotations``: one per person with at least one visible pixel:
  ``{id, image_id, category_id: 1, bbox: [x, y, w, h]`` (tight box of the
  person's visible pixels, pixel ``i`` spanning ``[i, i + 1)``), ``area``
  (visible pixel count), ``iscrowd: 0``, ``num_keypoints`` (v > 0),
  ``keypoints: [x, y, v] * K}`` with ``K = 308`` (Goliath order) or 17
  (COCO order, mapped by name); pixel centres are at integer ``(x, y)``;
  ``v = 2`` labelled and visible, ``v = 1`` labelled, inside the image but
  occluded (by another part, person or the far side of the body),
  ``v = 0`` with ``x = y = 0`` not modelled or outside the image;
* ``categories``: ``[{id: 1, name: "person", keypoints: names,
  skeleton: 1-based pairs}]``.

Image ``i`` of a split is rendered from ``SeedSequence([seed, split, i])``
(split 0 = train, 1 = val), so a dataset is reproducible file by file and
does not depend on the number of workers.
"""
from __future__ import annotations

import json
from multiprocessing import get_context
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

import numpy as np
from PIL import Image
from tqdm import tqdm

from .metadata import (COCO17_SKELETON, goliath_skeleton, keypoint_names)
from .render import render_sample

SPLITS = ('train', 'val')
SUBDIRS = ('images', 'masks', 'depths', 'normals', 'annotations')
MATTING_SUBDIRS = ('alphas', 'fgs', 'bgs')


def sample_seed(seed: int, split: str, index: int) -> np.random.SeedSequence:
    """Seed of image ``index`` of ``split`` in a dataset made with ``seed``."""
    return np.random.SeedSequence([int(seed), SPLITS.index(split), int(index)])


def _categories(num: int) -> List[dict]:
    skeleton = goliath_skeleton() if num == 308 else COCO17_SKELETON
    return [dict(id=1, name='person', supercategory='person',
                 keypoints=keypoint_names(num),
                 skeleton=[list(s) for s in skeleton])]


def _kp_list(kps: np.ndarray) -> List[float]:
    out: List[float] = []
    for x, y, v in kps:
        out += [round(float(x), 2), round(float(y), 2), int(v)]
    return out


def render_and_save(task: Tuple[str, str, int, int, Tuple[int, int], int,
                                bool]):
    """Render image ``index`` and write its image/mask/depth/normal (and
    matting) files."""
    root, split, index, seed, size, max_people, matting = task
    sample = render_sample(sample_seed(seed, split, index), size=size,
                           max_people=max_people, soft_edges=matting)
    stem = f'{index:06d}'
    d = Path(root) / split
    # fast zlib level: level 6 costs ~5x the time for ~10% smaller files
    Image.fromarray(sample['image']).save(d / 'images' / f'{stem}.png',
                                          compress_level=1)
    Image.fromarray(sample['mask']).save(d / 'masks' / f'{stem}.png',
                                         compress_level=1)
    np.save(d / 'depths' / f'{stem}.npy', sample['depth'])
    np.save(d / 'normals' / f'{stem}.npy', sample['normal'])
    if matting:
        alpha = np.rint(sample['alpha'] * 65535.0).astype(np.uint16)
        Image.fromarray(alpha).save(d / 'alphas' / f'{stem}.png')
        for key, sub in (('foreground', 'fgs'), ('background', 'bgs')):
            Image.fromarray(sample[key]).save(d / sub / f'{stem}.png',
                                              compress_level=1)
    people = [dict(keypoints=_kp_list(p['keypoints']),
                   keypoints_coco=_kp_list(p['keypoints_coco']),
                   bbox=p['bbox'], area=p['area'],
                   num_keypoints=p['num_keypoints'],
                   num_keypoints_coco=p['num_keypoints_coco'])
              for p in sample['people']]
    return index, stem, sample['K'].round(6).tolist(), people


def _write_json(path: Path, images: List[dict], anns: List[dict], num: int,
                seed: int) -> None:
    doc = dict(
        info=dict(description=f'sapiens_mm synthetic humans, {num} keypoints',
                  seed=int(seed), camera='OpenCV: X right, Y down, Z forward; '
                  'pixel centres at integer coordinates'),
        images=images, annotations=anns, categories=_categories(num))
    with open(path, 'w', encoding='utf-8') as f:
        json.dump(doc, f, separators=(',', ':'))


def write_dataset(out_dir: Union[str, Path], num_train: int, num_val: int,
                  seed: int = 0, size: Tuple[int, int] = (256, 192),
                  max_people: int = 3, num_workers: int = 0,
                  progress: bool = True,
                  matting: bool = False) -> Dict[str, int]:
    """Render and write ``num_train`` + ``num_val`` labelled images.

    Args:
        out_dir: Output folder (created if needed).
        num_train: Number of training images.
        num_val: Number of validation images.
        seed: Dataset seed; the same seed gives byte-identical files.
        size: ``(height, width)`` of the images.
        max_people: Maximum number of people per image.
        num_workers: Worker processes (0: render in this process).
        progress: Show a tqdm progress bar.
        matting: Soft-edged people and the ``alphas`` / ``fgs`` / ``bgs``
            folders (see the module docstring).

    Returns:
        Number of person annotations written per split.
    """
    if int(max_people) < 1:
        raise ValueError(f'max_people must be at least 1, got {max_people}.')
    out = Path(out_dir)
    tasks = []
    for split, n in zip(SPLITS, (num_train, num_val)):
        for sub in SUBDIRS + (MATTING_SUBDIRS if matting else ()):
            (out / split / sub).mkdir(parents=True, exist_ok=True)
        tasks += [(str(out), split, i, int(seed), (int(size[0]), int(size[1])),
                   int(max_people), bool(matting)) for i in range(int(n))]
    results: Dict[str, List[tuple]] = {s: [] for s in SPLITS}
    bar = tqdm(total=len(tasks), desc='synthetic humans', unit='img',
               disable=not progress)
    pool = get_context().Pool(num_workers) if num_workers > 0 else None
    try:
        it = pool.imap(render_and_save, tasks, chunksize=4) if pool else \
            map(render_and_save, tasks)
        for task, res in zip(tasks, it):
            results[task[1]].append(res)
            bar.update(1)
    finally:
        bar.close()
        if pool is not None:
            pool.close()
            pool.join()
    counts = {}
    height, width = int(size[0]), int(size[1])
    for split in SPLITS:
        images, anns308, anns17 = [], [], []
        for index, stem, K, people in sorted(results[split]):
            img_id = index + 1
            images.append(dict(id=img_id, file_name=f'{stem}.png',
                               height=height, width=width, cam_K=K))
            for p in people:
                common = dict(image_id=img_id, category_id=1, bbox=p['bbox'],
                              area=p['area'], iscrowd=0)
                anns308.append(dict(id=len(anns308) + 1, **common,
                                    num_keypoints=p['num_keypoints'],
                                    keypoints=p['keypoints']))
                anns17.append(dict(id=len(anns17) + 1, **common,
                                   num_keypoints=p['num_keypoints_coco'],
                                   keypoints=p['keypoints_coco']))
        ann_dir = out / split / 'annotations'
        _write_json(ann_dir / 'goliath_308.json', images, anns308, 308, seed)
        _write_json(ann_dir / 'coco_17.json', images, anns17, 17, seed)
        counts[split] = len(anns308)
    return counts


def load_sample(root: Union[str, Path], split: str, stem: str,
                ) -> Dict[str, np.ndarray]:
    """Read back the image, mask, depth and normals of one written sample.

    Args:
        root: Dataset folder given to :func:`write_dataset`.
        split: ``'train'`` or ``'val'``.
        stem: File stem, e.g. ``'000000'``.

    Returns:
        Dict with ``image`` (H, W, 3) uint8, ``mask`` (H, W) uint8, ``depth``
        (H, W) float32 and ``normal`` (H, W, 3) float32.
    """
    d = Path(root) / split
    return dict(image=np.asarray(Image.open(d / 'images' / f'{stem}.png')),
                mask=np.asarray(Image.open(d / 'masks' / f'{stem}.png')),
                depth=np.load(d / 'depths' / f'{stem}.npy'),
                normal=np.load(d / 'normals' / f'{stem}.npy'))


def read_annotations(root: Union[str, Path], split: str,
                     num: int = 308) -> Optional[dict]:
    """Load ``goliath_308.json`` (``num=308``) or ``coco_17.json``."""
    name = 'goliath_308.json' if num == 308 else 'coco_17.json'
    with open(Path(root) / split / 'annotations' / name,
              encoding='utf-8') as f:
        return json.load(f)
