"""Person boxes for top-down pose estimation.

Three sources, from the most to the least accurate:

* :class:`MMDetPersonDetector`: any mmdet detector from a config and a
  checkpoint (the official Sapiens demo uses RTMDet-m person,
  ``rtmdet_m_640-8xb32_coco-person_no_nms.py`` +
  ``rtmdet_m_8xb32-100e_coco-obj365-person-235e8209.pth``).
* :class:`OpenCVPersonDetector`: OpenCV's built-in HOG pedestrian detector
  or the full-body Haar cascade shipped in ``cv2.data``: no download, works
  offline, but only finds upright, fully visible people of a reasonable
  size.
* The whole image (when nothing is found), as in the official demos.

:func:`select_person_boxes` applies that fallback order (user boxes, if
given, come first), the score threshold and NMS.
"""
from abc import ABCMeta, abstractmethod
from typing import Literal, Optional, Tuple, Union

import cv2
import numpy as np

__all__ = [
    'PersonDetector', 'OpenCVPersonDetector', 'MMDetPersonDetector',
    'build_person_detector', 'nms', 'filter_boxes', 'select_person_boxes',
    'whole_image_box'
]

BoxesScores = Tuple[np.ndarray, np.ndarray]


def _empty() -> BoxesScores:
    return np.zeros((0, 4), np.float32), np.zeros((0, ), np.float32)


def nms(boxes: np.ndarray, scores: np.ndarray, iou_thr: float) -> np.ndarray:
    """Greedy non-maximum suppression.

    Args:
        boxes: (N, 4) boxes as (x1, y1, x2, y2).
        scores: (N, ) scores.
        iou_thr: Boxes overlapping a higher-scored kept box with an IoU above
            this are dropped.

    Returns:
        Indices of the kept boxes, highest score first.
    """
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    order = np.argsort(-np.asarray(scores, np.float64), kind='stable')
    areas = np.clip(boxes[:, 2] - boxes[:, 0], 0, None) * np.clip(
        boxes[:, 3] - boxes[:, 1], 0, None)
    keep = []
    while order.size:
        i = order[0]
        keep.append(i)
        rest = order[1:]
        w = np.clip(
            np.minimum(boxes[i, 2], boxes[rest, 2]) -
            np.maximum(boxes[i, 0], boxes[rest, 0]), 0, None)
        h = np.clip(
            np.minimum(boxes[i, 3], boxes[rest, 3]) -
            np.maximum(boxes[i, 1], boxes[rest, 1]), 0, None)
        inter = w * h
        iou = inter / np.maximum(areas[i] + areas[rest] - inter, 1e-12)
        order = rest[iou <= iou_thr]
    return np.asarray(keep, np.int64)


def filter_boxes(boxes: np.ndarray,
                 scores: np.ndarray,
                 img_shape: Tuple[int, int],
                 score_thr: float = 0.3,
                 nms_thr: Optional[float] = 0.3) -> BoxesScores:
    """Clip boxes to the image, drop empty and low-score ones, apply NMS.

    Args:
        boxes: (N, 4) (x1, y1, x2, y2).
        scores: (N, ).
        img_shape: (H, W) of the image.
        score_thr: Minimum score kept.
        nms_thr: NMS IoU threshold; None skips NMS.

    Returns:
        (M, 4) float32 boxes and (M, ) float32 scores, highest score first.
    """
    boxes = np.asarray(boxes, np.float32).reshape(-1, 4).copy()
    scores = np.asarray(scores, np.float32).reshape(-1)
    h, w = img_shape[:2]
    boxes[:, 0::2] = np.clip(boxes[:, 0::2], 0, w)
    boxes[:, 1::2] = np.clip(boxes[:, 1::2], 0, h)
    ok = (scores >= score_thr) & (boxes[:, 2] - boxes[:, 0] >= 1) & (
        boxes[:, 3] - boxes[:, 1] >= 1)
    boxes, scores = boxes[ok], scores[ok]
    if nms_thr is not None and len(boxes) > 1:
        keep = nms(boxes, scores, nms_thr)
    else:
        keep = np.argsort(-scores, kind='stable')
    return boxes[keep], scores[keep]


def whole_image_box(img_shape: Tuple[int, int]) -> np.ndarray:
    """The (1, 4) box covering a whole (H, W) image."""
    h, w = img_shape[:2]
    return np.array([[0, 0, w, h]], np.float32)


class PersonDetector(metaclass=ABCMeta):
    """Finds people in a BGR image."""

    @abstractmethod
    def __call__(self, img: np.ndarray) -> BoxesScores:
        """Detect people.

        Args:
            img: (H, W, 3) uint8 BGR image.

        Returns:
            (N, 4) float32 boxes (x1, y1, x2, y2) in image pixels and (N, )
            float32 scores, before any threshold or NMS.
        """


class OpenCVPersonDetector(PersonDetector):
    """OpenCV's built-in person detectors (no download needed).

    Args:
        method: ``'hog'``: the HOG + linear SVM pedestrian detector
            (Dalal-Triggs); scores are SVM margins, typically 0-3.
            ``'haar'``: the full-body Haar cascade from ``cv2.data``; scores
            are the cascade's level weights. Both detect upright, mostly
            fully visible people; close-ups and sitting people are missed
            (then the whole image is used).
        max_side: Images are resized so that their longer side is at most
            this (speed); boxes are mapped back. Images whose shorter side
            is below 256 pixels are upscaled to it (the HOG window is
            64x128).
    """

    def __init__(self,
                 method: Literal['hog', 'haar'] = 'hog',
                 max_side: int = 800) -> None:
        if method == 'hog':
            self._hog = cv2.HOGDescriptor()
            self._hog.setSVMDetector(
                cv2.HOGDescriptor_getDefaultPeopleDetector())
        elif method == 'haar':
            path = cv2.data.haarcascades + 'haarcascade_fullbody.xml'
            self._cascade = cv2.CascadeClassifier(path)
            if self._cascade.empty():
                raise RuntimeError(f'OpenCV could not read {path}; reinstall '
                                   'opencv-python.')
        else:
            raise ValueError(f'Unknown OpenCV person detector {method!r}; '
                             'choose "hog" or "haar".')
        self.method = method
        self.max_side = max_side

    def __call__(self, img: np.ndarray) -> BoxesScores:
        h, w = img.shape[:2]
        scale = min(1.0, self.max_side / max(h, w))
        if min(h, w) * scale < 256:
            scale = 256 / min(h, w)
        small = img if scale == 1.0 else cv2.resize(
            img, (max(1, round(w * scale)), max(1, round(h * scale))),
            interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR)
        if self.method == 'hog':
            rects, weights = self._hog.detectMultiScale(
                small, winStride=(8, 8), padding=(8, 8), scale=1.05)
        else:
            gray = cv2.cvtColor(small, cv2.COLOR_BGR2GRAY)
            rects, _, weights = self._cascade.detectMultiScale3(
                gray, scaleFactor=1.1, minNeighbors=3,
                outputRejectLevels=True)
        if len(rects) == 0:
            return _empty()
        rects = np.asarray(rects, np.float32).reshape(-1, 4) / scale
        boxes = np.concatenate([rects[:, :2], rects[:, :2] + rects[:, 2:]],
                               axis=1)
        return boxes, np.asarray(weights, np.float32).reshape(-1)


class MMDetPersonDetector(PersonDetector):
    """An mmdet detector, keeping one category (person).

    Args:
        config: mmdet config file (or Config).
        checkpoint: Its weights, read through
            :func:`sapiens_mm.checkpoint.load_checkpoint`. None keeps random
            weights (only useful for tests).
        device: Torch device.
        cat_id: Category index of "person" in the detector's classes.
            Defaults to 0 (COCO and the Sapiens RTMDet person detector).
    """

    def __init__(self,
                 config,
                 checkpoint: Optional[str] = None,
                 device: str = 'cpu',
                 cat_id: int = 0) -> None:
        try:
            from mmdet.apis import init_detector
        except ImportError as e:
            raise ImportError(
                'An mmdet detector config was given but mmdet cannot be '
                f'imported ({e}). Install it with `mim install "mmdet>=3.1"`'
                ' or use the built-in detector (detector="hog").') from e
        from mmengine.registry import DefaultScope

        from sapiens_mm.checkpoint import load_checkpoint
        with DefaultScope.overwrite_default_scope('mmdet'):
            self.model = init_detector(config, None, device=device)
        if checkpoint is not None:
            ckpt = load_checkpoint(self.model, checkpoint, strict=False)
            meta = ckpt.get('meta', {}) if isinstance(ckpt, dict) else {}
            if 'dataset_meta' in meta:
                self.model.dataset_meta = meta['dataset_meta']
        self.cat_id = cat_id

    def __call__(self, img: np.ndarray) -> BoxesScores:
        from mmdet.apis import inference_detector
        from mmengine.registry import DefaultScope
        with DefaultScope.overwrite_default_scope('mmdet'):
            pred = inference_detector(self.model, img).pred_instances
        pred = pred.cpu().numpy()
        keep = pred.labels == self.cat_id
        return (pred.bboxes[keep].astype(np.float32),
                pred.scores[keep].astype(np.float32))


def build_person_detector(detector: Union[str, PersonDetector, None] = 'hog',
                          det_config=None,
                          det_checkpoint: Optional[str] = None,
                          device: str = 'cpu',
                          det_cat_id: int = 0) -> Optional[PersonDetector]:
    """Build the person detector of the pose task.

    Args:
        detector: ``'hog'`` or ``'haar'`` (built-in OpenCV detectors),
            ``'none'`` / None (no detector: user boxes or the whole image),
            or a :class:`PersonDetector`. Ignored when ``det_config`` is
            given.
        det_config: mmdet config; with ``det_checkpoint``, takes priority.
        det_checkpoint: mmdet checkpoint.
        device: Torch device of the mmdet model.
        det_cat_id: Person category index of the mmdet model.

    Returns:
        The detector, or None for no detector.
    """
    if det_config is not None:
        return MMDetPersonDetector(det_config, det_checkpoint, device,
                                   det_cat_id)
    if det_checkpoint is not None:
        raise ValueError('det_checkpoint needs det_config (the mmdet config '
                         'of that detector).')
    if isinstance(detector, PersonDetector):
        return detector
    if detector is None or detector == 'none':
        return None
    if detector in ('hog', 'haar'):
        return OpenCVPersonDetector(detector)
    raise ValueError(f'Unknown detector {detector!r}: use "hog", "haar", '
                     '"none", a PersonDetector, or det_config/det_checkpoint '
                     'for an mmdet detector.')


def select_person_boxes(
        img: np.ndarray,
        detector: Optional[PersonDetector] = None,
        user_boxes: Optional[np.ndarray] = None,
        bbox_thr: float = 0.3,
        nms_thr: Optional[float] = 0.3) -> Tuple[np.ndarray, np.ndarray, str]:
    """The person boxes of one image, with the fallback order.

    1. ``user_boxes`` when given (N x 4 (x1, y1, x2, y2), or N x 5 with a
       score as the last column): clipped to the image, in the given order,
       no threshold / NMS (boxes entirely outside the image are dropped).
    2. Else the detector's boxes with score >= ``bbox_thr``, after NMS.
    3. Else (no detector or nothing found) the whole image, score 1.

    Args:
        img: (H, W, 3) BGR image.
        detector: Person detector or None.
        user_boxes: Boxes given by the user for this image.
        bbox_thr: Detector score threshold.
        nms_thr: NMS IoU threshold (None: no NMS).

    Returns:
        (N, 4) float32 boxes, (N, ) float32 scores and their source:
        ``'user'``, ``'detector'`` or ``'whole_image'``.

    Raises:
        ValueError: ``user_boxes`` is not N x 4 or N x 5.
    """
    shape = img.shape[:2]
    if user_boxes is not None and len(user_boxes):
        arr = np.asarray(user_boxes, np.float32)
        if arr.ndim == 1:
            arr = arr[None]
        if arr.ndim != 2 or arr.shape[1] not in (4, 5):
            raise ValueError(
                f'Person boxes must be N x 4 (x1, y1, x2, y2) or N x 5 (with '
                f'a score); got shape {arr.shape}.')
        scores = arr[:, 4] if arr.shape[1] == 5 else np.ones(len(arr),
                                                             np.float32)
        boxes = arr[:, :4].copy()
        boxes[:, 0::2] = np.clip(boxes[:, 0::2], 0, shape[1])
        boxes[:, 1::2] = np.clip(boxes[:, 1::2], 0, shape[0])
        ok = (boxes[:, 2] - boxes[:, 0] >= 1) & (boxes[:, 3] - boxes[:, 1] >= 1)
        if ok.any():  # user order kept
            return boxes[ok], scores[ok].astype(np.float32), 'user'
    if detector is not None:
        boxes, scores = detector(img)
        boxes, scores = filter_boxes(boxes, scores, shape, bbox_thr, nms_thr)
        if len(boxes):
            return boxes, scores, 'detector'
    return whole_image_box(shape), np.ones(1, np.float32), 'whole_image'
