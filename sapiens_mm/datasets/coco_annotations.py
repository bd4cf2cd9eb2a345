"""Checks of COCO-format keypoint annotation files, with errors that name
the file and the entry.

Annotation files are user input: mmpose's COCO datasets and metrics fail on
a malformed one with errors that name neither the file nor the entry
(``KeyError: 'image_id'``, ``need at least one array to concatenate``,
``unsupported operand type(s) for -: 'NoneType' and 'int'``) and accept
non-finite or negative-size boxes, which then change the evaluation. The
checks here are plain data checks of the parsed JSON: nothing in the file is
ever executed, and the file is read with :mod:`json` only, whatever its
suffix.

:class:`CheckedCocoAnnotationsMixin` adds them to a COCO-style dataset and
:class:`~sapiens_mm.evaluation.metrics.CheckedCocoGroundTruthMixin` to a COCO
metric's ``ann_file``. A valid file loads exactly as with the stock class.
"""
import json
import math
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np
from mmengine.fileio import get_local_path
from mmpose.datasets import CocoDataset, CocoWholeBodyDataset
from mmpose.registry import DATASETS

__all__ = [
    'AnnotationFileError', 'UnexplainedAnnotationError',
    'check_coco_keypoint_annotations', 'check_detection_results',
    'read_annotation_json', 'read_detection_results',
    'explain_annotation_error',
    'CheckedCocoAnnotationsMixin', 'CheckedCocoDataset',
    'CheckedCocoWholeBodyDataset', 'WHOLEBODY_KEYPOINT_FIELDS',
    'ANNOTATION_PARSE_ERRORS'
]

#: Keypoint fields of a COCO-WholeBody annotation and their keypoint counts,
#: in the order of mmpose's ``CocoWholeBodyDataset``.
WHOLEBODY_KEYPOINT_FIELDS: Dict[str, int] = {
    'keypoints': 17,
    'foot_kpts': 6,
    'face_kpts': 68,
    'lefthand_kpts': 21,
    'righthand_kpts': 21,
}

#: Errors mmpose / xtcocotools raise on a malformed annotation file (they
#: are explained by :func:`explain_annotation_error`).
ANNOTATION_PARSE_ERRORS = (KeyError, TypeError, ValueError, IndexError,
                           AttributeError)


class AnnotationFileError(ValueError):
    """A COCO annotation file that cannot be used, with the file and entry
    named in the message."""


class UnexplainedAnnotationError(AnnotationFileError):
    """mmpose failed on an annotation file in which the checks found no
    invalid entry (the message names the file and mmpose's error)."""


def read_annotation_json(ann_file: str, what: str = 'Annotation file') -> Any:
    """Parse ``ann_file`` (a path or mmengine URI) as JSON.

    Args:
        ann_file: The file.
        what: What the file is, for the message.

    Raises:
        AnnotationFileError: if the file is not UTF-8 JSON.
        FileNotFoundError: if it does not exist.
    """
    with get_local_path(ann_file) as local_path:
        try:
            with open(local_path, encoding='utf-8') as f:
                return json.load(f)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise AnnotationFileError(
                f'{what} {ann_file} is not valid JSON ({e}); fix or '
                'regenerate it.') from None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _numbers(values: Any) -> Optional[np.ndarray]:
    """``values`` as a float64 vector, or None if it is not a list of
    numbers (strings, None, nested lists and booleans are refused)."""
    if not isinstance(values, (list, tuple)):
        return None
    array = np.asarray(values)
    if array.ndim != 1 or (array.size and array.dtype.kind not in 'iuf'):
        return None
    return array.astype(np.float64)


def _check_box(value: Any) -> Optional[str]:
    """Problem with a COCO ``bbox`` (x, y, width, height), or None."""
    box = _numbers(value)
    if box is None or box.size != 4:
        return f'"bbox" must be 4 numbers (x, y, width, height), got {value!r}'
    if not np.isfinite(box).all():
        return f'"bbox" {value} has a non-finite value'
    if box[2] < 0 or box[3] < 0:
        return (f'"bbox" {value} has a negative width or height (the format '
                'is x, y, width, height)')
    return None


def _check_image(image: Any, index: int, image_files: bool) -> Optional[str]:
    if not isinstance(image, dict):
        return f'images[{index}] is a {type(image).__name__}, not an object'
    where = f'images[{index}] (id {image.get("id")!r})'
    image_id = image.get('id')
    if not isinstance(image_id, int) or isinstance(image_id, bool):
        return f'images[{index}] has no integer "id" (got {image_id!r})'
    if not image_files:
        return None
    if not isinstance(image.get('file_name'), str):
        return f'{where} has no "file_name" string'
    for key in ('width', 'height'):
        size = image.get(key)
        if not (_is_number(size) and math.isfinite(size) and size > 0):
            return (f'{where}: "{key}" must be a positive number, got '
                    f'{size!r}')
    return None


def _check_keypoints(ann: dict, layout: Optional[Mapping[str, int]],
                     lengths: Dict[str, int]) -> Optional[str]:
    """Problem with the keypoint fields of ``ann``, or None.

    ``layout`` maps each required field to its keypoint count; None checks
    ``keypoints`` (and any COCO-WholeBody field present) for numbers in
    triplets, of one length per field across the file (``lengths`` holds
    the first length seen).
    """
    fields = layout or {
        field: None
        for field in WHOLEBODY_KEYPOINT_FIELDS if field in ann
    }
    for field, count in fields.items():
        if field not in ann:
            return f'"{field}" is missing'
        values = _numbers(ann[field])
        if values is None:
            return f'"{field}" must be a list of numbers'
        if not np.isfinite(values).all():
            return (f'"{field}" has a non-finite value '
                    f'({values[~np.isfinite(values)][0]})')
        if count is not None and values.size != 3 * count:
            return (f'"{field}" has {values.size} values; this dataset needs '
                    f'{3 * count} (x, y, visibility for each of {count} '
                    'keypoints)')
        if count is None:
            if values.size % 3:
                return (f'"{field}" has {values.size} values, not a multiple '
                        'of 3 (x, y, visibility per keypoint)')
            first = lengths.setdefault(field, values.size)
            if values.size != first:
                return (f'"{field}" has {values.size} values but the first '
                        f'annotation has {first}; all annotations must use '
                        'the same keypoints')
    return None


def _check_annotation(ann: Any, image_ids: set,
                      layout: Optional[Mapping[str, int]],
                      required: Tuple[str, ...],
                      lengths: Dict[str, int]) -> Optional[str]:
    """Problem with one annotation, or None (messages start with a verb or
    a field name; the caller prefixes the entry)."""
    if not isinstance(ann, dict):
        return f'is a {type(ann).__name__}, not an object'
    for key in ('id', 'image_id'):
        value = ann.get(key)
        if not isinstance(value, int) or isinstance(value, bool):
            return (f'"{key}" is missing' if key not in ann else
                    f'"{key}" must be an integer, got {value!r}')
    if ann['image_id'] not in image_ids:
        return (f'"image_id" {ann["image_id"]} is not the id of any entry of '
                '"images"')
    for key in ('category_id', ) + required:
        if key not in ann:
            return f'"{key}" is missing'
    if 'bbox' in ann:
        problem = _check_box(ann['bbox'])
        if problem:
            return problem
    if 'area' in ann:
        area = ann['area']
        if not (_is_number(area) and math.isfinite(area) and area >= 0):
            return f'"area" must be a non-negative number, got {area!r}'
    if 'iscrowd' in ann and ann['iscrowd'] not in (0, 1):
        return f'"iscrowd" must be 0 or 1, got {ann["iscrowd"]!r}'
    if 'num_keypoints' in ann:
        num = ann['num_keypoints']
        if not isinstance(num, int) or isinstance(num, bool) or num < 0:
            return ('"num_keypoints" must be a non-negative integer, got '
                    f'{num!r}')
    if 'keypoints' in ann or layout is not None and any(
            field in ann for field in layout):
        return _check_keypoints(ann, layout, lengths)
    return None


def check_coco_keypoint_annotations(
        data: Any,
        ann_file: str,
        keypoint_layout: Optional[Mapping[str, int]] = None,
        required: Tuple[str, ...] = (),
        image_files: bool = True) -> None:
    """Check a parsed COCO keypoint annotation file.

    Checked: ``images`` entries (integer unique ``id``; ``file_name`` and
    positive ``width`` / ``height`` if ``image_files``); ``annotations``
    entries (integer unique ``id``, ``image_id`` of an image in the file,
    ``category_id``; a ``bbox`` of 4 finite numbers with non-negative width
    and height; ``area`` finite and non-negative; ``iscrowd`` 0 or 1;
    ``num_keypoints`` a non-negative integer; keypoint fields lists of
    finite numbers of the expected length). Annotations without ``bbox`` or
    ``keypoints`` are allowed unless ``required`` names them (mmpose's
    ``CocoDataset`` skips them).

    Args:
        data: The parsed JSON.
        ann_file: The file's name, for the messages.
        keypoint_layout: Required keypoint fields and their keypoint counts
            (e.g. ``{'keypoints': 17}``); None: ``keypoints`` and any
            COCO-WholeBody field present are checked for triplets of finite
            numbers, of one length per field across the file.
        required: Further annotation keys that must be present.
        image_files: Whether ``images`` entries need ``file_name``,
            ``width`` and ``height`` (a dataset reads the images; a metric's
            ground truth needs only the ids).

    Raises:
        AnnotationFileError: naming the file, the entry (index, ``id`` and
            ``image_id``) and what is wrong.
    """
    if not isinstance(data, dict):
        raise AnnotationFileError(
            f'{ann_file}: a COCO annotation file is a JSON object with '
            f'"images" and "annotations", got a {type(data).__name__}')
    for key in ('images', 'annotations'):
        if not isinstance(data.get(key), list):
            raise AnnotationFileError(
                f'{ann_file}: "{key}" is missing or not a list')
    image_ids = set()
    for index, image in enumerate(data['images']):
        problem = _check_image(image, index, image_files)
        if problem is None and image['id'] in image_ids:
            problem = f'images[{index}]: "id" {image["id"]} appears twice'
        if problem:
            raise AnnotationFileError(f'{ann_file}: {problem}')
        image_ids.add(image['id'])
    ann_ids = set()
    lengths: Dict[str, int] = {}
    for index, ann in enumerate(data['annotations']):
        problem = _check_annotation(ann, image_ids, keypoint_layout,
                                    required, lengths)
        if problem is None and ann['id'] in ann_ids:
            problem = f'"id" {ann["id"]} appears twice'
        if problem:
            entry = f'annotations[{index}]'
            if isinstance(ann, dict):
                entry += (f' (id {ann.get("id")!r}, image_id '
                          f'{ann.get("image_id")!r})')
            raise AnnotationFileError(f'{ann_file}: {entry}: {problem}')
        ann_ids.add(ann['id'])


def explain_annotation_error(ann_file: str, error: Exception,
                             **check_kwargs) -> AnnotationFileError:
    """The error to raise after mmpose or xtcocotools failed on
    ``ann_file``: the first invalid entry the checks find, else ``error``
    with the file named.

    Args:
        ann_file: The annotation file that was being read.
        error: What mmpose or xtcocotools raised.
        **check_kwargs: ``keypoint_layout`` / ``required`` /
            ``image_files`` of
            :func:`check_coco_keypoint_annotations`.
    """
    if isinstance(error, AnnotationFileError):
        return error
    try:
        check_coco_keypoint_annotations(
            read_annotation_json(ann_file), ann_file, **check_kwargs)
    except AnnotationFileError as found:
        return found
    return UnexplainedAnnotationError(
        f'{ann_file}: not a usable COCO keypoint file '
        f'({type(error).__name__}: {error})')


def check_detection_results(detections: Any,
                            bbox_file: str,
                            image_ids: Optional[set] = None) -> None:
    """Check parsed COCO detection results (a ``bbox_file``): a list of
    objects with an integer ``image_id`` (one of ``image_ids`` if given), a
    ``category_id``, a ``bbox`` of 4 finite numbers with non-negative width
    and height and a finite ``score``.

    Raises:
        AnnotationFileError: naming the file, the entry and what is wrong.
    """
    if not isinstance(detections, list):
        raise AnnotationFileError(
            f'{bbox_file}: detection results are a JSON list, got a '
            f'{type(detections).__name__}')
    for index, det in enumerate(detections):
        if not isinstance(det, dict):
            problem = f'is a {type(det).__name__}, not an object'
        elif not isinstance(det.get('image_id'), int) or isinstance(
                det.get('image_id'), bool):
            problem = ('"image_id" must be an integer, got '
                       f'{det.get("image_id")!r}')
        elif image_ids is not None and det['image_id'] not in image_ids:
            problem = (f'"image_id" {det["image_id"]} is not an image of the '
                       'annotation file')
        elif 'category_id' not in det:
            problem = '"category_id" is missing'
        elif not (_is_number(det.get('score'))
                  and math.isfinite(det['score'])):
            problem = ('"score" must be a finite number, got '
                       f'{det.get("score")!r}')
        else:
            problem = _check_box(det.get('bbox'))
        if problem:
            image_id = det.get('image_id') if isinstance(det, dict) else None
            raise AnnotationFileError(
                f'{bbox_file}: [{index}] (image_id {image_id!r}): {problem}')


def read_detection_results(bbox_file: str) -> list:
    """Read and check a COCO detection-results file (``bbox_file``).

    Only ``.json`` files are read: mmpose reads ``bbox_file`` with
    mmengine's ``load``, which would unpickle a ``.pkl`` and run a YAML
    loader on ``.yaml``.

    Raises:
        AnnotationFileError: for another suffix, a file that is not JSON or
            an invalid entry (see :func:`check_detection_results`).
    """
    if not str(bbox_file).endswith('.json'):
        raise AnnotationFileError(
            f'{bbox_file}: a detection-results file (bbox_file) must be a '
            '.json file; other formats are not read (they could run code)')
    detections = read_annotation_json(bbox_file, 'Detection-results file')
    check_detection_results(detections, bbox_file)
    return detections


class CheckedCocoAnnotationsMixin:
    """Checks the annotation file of an mmpose COCO-style dataset.

    Put it before the dataset class (``class D(CheckedCocoAnnotationsMixin,
    CocoDataset)``). After mmpose has read ``ann_file`` the parsed file is
    checked with :func:`check_coco_keypoint_annotations`; if mmpose fails on
    it, the error names the first invalid entry. A ``bbox_file`` (detected
    boxes) must be ``.json`` and is checked with
    :func:`check_detection_results` before mmpose reads it. A dataset with
    no usable person (all annotations crowd, without keypoints or skipped)
    is refused too, instead of numpy's ``need at least one array to
    concatenate``.
    """

    #: ``required`` of :func:`check_coco_keypoint_annotations`.
    required_annotation_keys: Tuple[str, ...] = ()

    def keypoint_layout(self) -> Optional[Dict[str, int]]:
        """Keypoint fields each annotation must hold and their keypoint
        counts (default: ``keypoints`` with the metainfo's count)."""
        return {'keypoints': self.metainfo['num_keypoints']}

    def _checked(self, load):
        checks = dict(keypoint_layout=self.keypoint_layout(),
                      required=self.required_annotation_keys)
        try:
            loaded = load()
        except ANNOTATION_PARSE_ERRORS as e:
            raise explain_annotation_error(self.ann_file, e,
                                           **checks) from None
        check_coco_keypoint_annotations(self.coco.dataset, self.ann_file,
                                        **checks)
        return loaded

    def _load_annotations(self) -> Tuple[List[dict], List[dict]]:
        return self._checked(super()._load_annotations)

    def _load_detection_results(self) -> List[dict]:
        detections = read_detection_results(self.bbox_file)
        try:
            return self._checked(super()._load_detection_results)
        except UnexplainedAnnotationError:
            # the annotation file is valid: a detection's image is not in it
            images = read_annotation_json(self.ann_file)['images']
            check_detection_results(detections, self.bbox_file,
                                    {image['id'] for image in images})
            raise

    def load_data_list(self) -> List[dict]:
        data_list = super().load_data_list()
        if not data_list:
            source = (f'{self.bbox_file} (with {self.ann_file})'
                      if self.bbox_file else self.ann_file)
            raise AnnotationFileError(
                f'{source}: no usable person annotation (each needs a '
                '"bbox", labelled keypoints and iscrowd 0); nothing to '
                'load')
        return data_list


@DATASETS.register_module()
class CheckedCocoDataset(CheckedCocoAnnotationsMixin, CocoDataset):
    """mmpose's :class:`~mmpose.datasets.CocoDataset` (17 COCO keypoints)
    whose annotation file is checked (see
    :class:`CheckedCocoAnnotationsMixin`). Same arguments and, for a valid
    file, the same data."""


@DATASETS.register_module()
class CheckedCocoWholeBodyDataset(CheckedCocoAnnotationsMixin,
                                  CocoWholeBodyDataset):
    """mmpose's :class:`~mmpose.datasets.CocoWholeBodyDataset` (133
    keypoints) whose annotation file is checked (see
    :class:`CheckedCocoAnnotationsMixin`): every annotation needs the five
    keypoint fields, ``bbox``, ``num_keypoints``, ``iscrowd`` and
    ``segmentation``, as mmpose reads them all. Same arguments and, for a
    valid file, the same data."""

    required_annotation_keys = ('bbox', 'keypoints', 'num_keypoints',
                                'iscrowd', 'segmentation')

    def keypoint_layout(self) -> Dict[str, int]:
        return dict(WHOLEBODY_KEYPOINT_FIELDS)
