"""The ``dataset_meta`` of a task model, derived from its config.

A model built from a config carries the metadata of the data it was
trained on, as mmpose / mmseg models do: keypoint names, flip pairs and
skeleton (pose), class names and palette (seg), the task name (dense
tasks). Stock OpenMMLab visualisers and inferencers read it.
"""
from mmengine.config import Config
from mmengine.registry import DefaultScope

from sapiens_mm.tasks import task_of_config

__all__ = [
    'pose_dataset_meta', 'seg_dataset_meta', 'dataset_meta_of_config',
    'skeleton_name'
]


def pose_dataset_meta(cfg: Config) -> dict:
    """Parsed keypoint metainfo of a pose config's dataset (names, flip
    indices, skeleton, colours), as ``mmpose`` datasets expose it.

    The test, then val, then train dataset is read: its ``metainfo`` entry,
    else its registered class's ``METAINFO``.

    Raises:
        ValueError: No dataset of the config tells the keypoints.
    """
    import mmpose.datasets  # noqa: F401  (registers the datasets)
    from mmpose.datasets.datasets.utils import parse_pose_metainfo
    from mmpose.registry import DATASETS
    for split in ('test_dataloader', 'val_dataloader', 'train_dataloader'):
        dataset = cfg.get(split, {}).get('dataset')
        if not dataset:
            continue
        if 'metainfo' in dataset:
            return parse_pose_metainfo(dict(dataset['metainfo']))
        with DefaultScope.overwrite_default_scope('mmpose'):
            dataset_cls = dataset['type'] if isinstance(
                dataset['type'], type) else DATASETS.get(dataset['type'])
        if dataset_cls is not None:
            return parse_pose_metainfo(dict(dataset_cls.METAINFO))
    raise ValueError(
        'Cannot read the keypoint metainfo (names, flip pairs, skeleton) '
        'of the pose config: its test_dataloader.dataset needs a '
        'registered mmpose dataset type or a `metainfo` entry.')


def seg_dataset_meta(num_classes: int) -> dict:
    """``classes``, ``palette`` and ``vocab`` of a body-part model with
    ``num_classes`` outputs (the shipped vocabularies).

    Raises:
        ValueError: No shipped vocabulary has that many classes.
    """
    from sapiens_mm.datasets.metainfo import (
        load_body_part_classes,
        vocab_for_num_classes,
    )
    vocab = vocab_for_num_classes(int(num_classes))
    info = load_body_part_classes(vocab)
    return dict(classes=tuple(info['classes']),
                palette=[list(map(int, c)) for c in info['palette']],
                vocab=vocab)


def _seg_num_classes(cfg: Config) -> int:
    head = cfg.model.decode_head
    return int(head.get('num_classes', head.get('out_channels', 0)))


def dataset_meta_of_config(cfg: Config) -> dict:
    """The ``dataset_meta`` a model of ``cfg`` carries: keypoint metainfo
    (pose), classes / palette (seg), the task name (depth, normal)."""
    task = task_of_config(cfg)
    if task == 'pose':
        return pose_dataset_meta(cfg)
    if task == 'seg':
        try:
            return seg_dataset_meta(_seg_num_classes(cfg))
        except ValueError:  # a custom vocabulary: the dataset's classes
            dataset = cfg.get('test_dataloader', {}).get('dataset', {})
            classes = dataset.get('metainfo', {}).get('classes')
            return dict(classes=tuple(classes)) if classes else {}
    return dict(task=task)


def skeleton_name(dataset_meta: dict) -> str:
    """Name of a pose skeleton: the metainfo's ``dataset_name`` (``'coco'``,
    ``'coco_wholebody'``, ``'goliath'``) or ``'<K>_keypoints'``."""
    name = dataset_meta.get('dataset_name')
    return str(name) if name else f'{dataset_meta["num_keypoints"]}_keypoints'
