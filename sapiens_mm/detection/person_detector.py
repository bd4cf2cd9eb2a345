"""Person detectors: the one detector family of sapiens_mm.

Used for the person boxes of top-down pose (:func:`select_person_boxes`)
and by the pretraining data curation (:mod:`sapiens_mm.datasets.curation`).
Every detector maps a BGR image to ``(boxes (N, 4) xyxy, scores (N,))``:

* :class:`MMDetPersonDetector`: any mmdet detector from a config and a
  checkpoint (the official Sapiens demo uses RTMDet-m person,
  ``rtmdet_m_640-8xb32_coco-person_no_nms.py`` +
  ``rtmdet_m_8xb32-100e_coco-obj365-person-235e8209.pth``); scores are
  class probabilities.
* :class:`OpenCVPersonDetector`: OpenCV's built-in HOG pedestrian detector
  or the full-body Haar cascade shipped in ``cv2.data``: no download, works
  offline, but only finds upright, fully visible people of a reasonable
  size.
* :class:`OpenCVFaceDetector`: OpenCV's frontal-face cascade (no download);
  finds people by their face, its box is the face box and its score the
  number of merged cascade windows (not a probability).

``build_person_detector('auto')``, the default of the inferencers and of
the ``infer`` command, is RTMDet-m (the model registry's
``rtmdet-m-person``, downloaded once) where mmdet runs, else HOG.

For pose, when nothing is found, the whole image is the person box, as in
the official demos. :func:`select_person_boxes` applies that fallback order
(user boxes, if given, come first), the score threshold and NMS (mmcv's).
"""
import os.path as osp
from abc import ABCMeta, abstractmethod
from typing import List, Literal, Optional, Sequence, Tuple, Union

import cv2
import numpy as np
import torch
from mmengine.logging import print_log

__all__ = [
    'PersonDetector', 'OpenCVPersonDetector', 'OpenCVFaceDetector',
    'MMDetPersonDetector', 'build_person_detector', 'nms', 'filter_boxes',
    'select_person_boxes', 'whole_image_box', 'boxes_per_input',
    'check_boxes', 'mmdet_import_error', 'AUTO_DETECTOR'
]

BoxesScores = Tuple[np.ndarray, np.ndarray]


def _empty() -> BoxesScores:
    return np.zeros((0, 4), np.float32), np.zeros((0, ), np.float32)


def nms(boxes: np.ndarray, scores: np.ndarray, iou_thr: float) -> np.ndarray:
    """Greedy non-maximum suppression (``mmcv.ops.nms``, as mmdet uses).

    Args:
        boxes: (N, 4) boxes as (x1, y1, x2, y2).
        scores: (N, ) scores.
        iou_thr: Boxes overlapping a higher-scored kept box with an IoU above
            this are dropped.

    Returns:
        Indices of the kept boxes, highest score first.
    """
    from mmcv.ops import nms as mmcv_nms
    boxes = torch.as_tensor(np.asarray(boxes, np.float32).reshape(-1, 4))
    if not len(boxes):
        return np.zeros(0, np.int64)
    scores = torch.as_tensor(np.asarray(scores, np.float32).reshape(-1))
    _, keep = mmcv_nms(boxes, scores, float(iou_thr))
    return keep.numpy().astype(np.int64)


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
    """Finds people in a BGR image.

    Attributes:
        default_score_thr: Score above which a detection is trusted (the
            scale of the scores differs between detectors).
        default_min_box_size: Longer box side (pixels) the curation keeps
            by default.
        fallback: Why this detector stands in for the one asked for (set by
            ``build_person_detector('auto')`` when RTMDet-m cannot run,
            e.g. ``'RTMDet-m weights not cached'``), else None. Drawn on the
            pose pictures beside :attr:`label`.
    """
    default_score_thr: float = 0.3
    default_min_box_size: float = 0.0
    fallback: Optional[str] = None

    @property
    def label(self) -> str:
        """A short name for people to read (pictures, log lines)."""
        return type(self).__name__

    @abstractmethod
    def __call__(self, img: np.ndarray) -> BoxesScores:
        """Detect people.

        Args:
            img: (H, W, 3) uint8 BGR image.

        Returns:
            (N, 4) float32 boxes (x1, y1, x2, y2) in image pixels and (N, )
            float32 scores, before any threshold or NMS.
        """

    def describe(self) -> dict:
        """The settings that change the detections (the curation stores
        them to check a resumed run uses the same detector)."""
        return dict(name=type(self).__name__)


def _to_boxes(rects, scores, scale: float) -> BoxesScores:
    """OpenCV (x, y, w, h) rectangles at ``scale`` -> image xyxy boxes."""
    if len(rects) == 0:
        return _empty()
    rects = np.asarray(rects, np.float32).reshape(-1, 4) / scale
    boxes = np.concatenate([rects[:, :2], rects[:, :2] + rects[:, 2:]],
                           axis=1)
    return boxes, np.asarray(scores, np.float32).reshape(-1)


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
            self.hog = cv2.HOGDescriptor()
            self.hog.setSVMDetector(
                cv2.HOGDescriptor_getDefaultPeopleDetector())
        elif method == 'haar':
            path = cv2.data.haarcascades + 'haarcascade_fullbody.xml'
            self.cascade = cv2.CascadeClassifier(path)
            if self.cascade.empty():
                raise RuntimeError(f'OpenCV could not read {path}; reinstall '
                                   'opencv-python.')
        else:
            raise ValueError(f'Unknown OpenCV person detector {method!r}; '
                             'choose "hog" or "haar".')
        self.method = method
        self.max_side = max_side

    @property
    def label(self) -> str:
        return f'OpenCV {self.method.upper() if self.method == "hog" else "Haar"}'

    def describe(self) -> dict:
        return dict(name=f'opencv-{self.method}', max_side=self.max_side)

    def __call__(self, img: np.ndarray) -> BoxesScores:
        h, w = img.shape[:2]
        scale = min(1.0, self.max_side / max(h, w))
        if min(h, w) * scale < 256:
            scale = 256 / min(h, w)
        small = img if scale == 1.0 else cv2.resize(
            img, (max(1, round(w * scale)), max(1, round(h * scale))),
            interpolation=cv2.INTER_AREA if scale < 1 else cv2.INTER_LINEAR)
        if self.method == 'hog':
            rects, weights = self.hog.detectMultiScale(
                small, winStride=(8, 8), padding=(8, 8), scale=1.05)
        else:
            gray = cv2.cvtColor(small, cv2.COLOR_BGR2GRAY)
            rects, _, weights = self.cascade.detectMultiScale3(
                gray, scaleFactor=1.1, minNeighbors=3,
                outputRejectLevels=True)
        return _to_boxes(rects, weights, scale)


class OpenCVFaceDetector(PersonDetector):
    """OpenCV's frontal-face Haar cascade (``haarcascade_frontalface_alt2``,
    shipped with opencv-python): people found by their face.

    Its box is the face box and its score the number of overlapping raw
    cascade windows merged into it (OpenCV's "neighbours" count; more votes
    = more certain), not a probability. Hence its defaults for the
    curation: at least 15 votes and a face at least 64 px wide (a 64 px
    face is roughly a 300 px tall upper body). On scikit-image's test
    pictures the astronaut's face gets 29-36 votes at 0.5x-2x scale, while
    false detections on textures (gravel, grass, coins) get at most 9.

    Args:
        max_side: Longer side the image is downscaled to before detection
            (boxes are reported in original pixels). Defaults to 1024.
        scale_factor: Cascade pyramid step. Defaults to 1.1.
        min_neighbors: OpenCV grouping threshold (candidates with fewer
            merged windows are not reported at all). Defaults to 3.
    """
    name = 'opencv-face'
    cascade_file = 'haarcascade_frontalface_alt2.xml'
    default_score_thr = 15.0
    default_min_box_size = 64.0

    def __init__(self,
                 max_side: int = 1024,
                 scale_factor: float = 1.1,
                 min_neighbors: int = 3) -> None:
        path = osp.join(cv2.data.haarcascades, self.cascade_file)
        self.cascade = cv2.CascadeClassifier(path)
        if self.cascade.empty():
            raise RuntimeError(
                f'Could not load the OpenCV cascade {path}; reinstall '
                'opencv-python, or pass an mmdet detector config and '
                'checkpoint.')
        self.max_side = max_side
        self.scale_factor = scale_factor
        self.min_neighbors = min_neighbors

    @property
    def label(self) -> str:
        return 'OpenCV face'

    def describe(self) -> dict:
        return dict(name=self.name,
                    cascade=self.cascade_file,
                    max_side=self.max_side,
                    scale_factor=self.scale_factor,
                    min_neighbors=self.min_neighbors)

    def __call__(self, img: np.ndarray) -> BoxesScores:
        gray = cv2.cvtColor(img, cv2.COLOR_BGR2GRAY)
        scale = min(1.0, self.max_side / max(gray.shape[:2]))
        if scale < 1:
            gray = cv2.resize(gray, None, fx=scale, fy=scale,
                              interpolation=cv2.INTER_AREA)
        rects, votes = self.cascade.detectMultiScale2(
            gray, scaleFactor=self.scale_factor,
            minNeighbors=self.min_neighbors)
        return _to_boxes(rects, votes, scale)


class MMDetPersonDetector(PersonDetector):
    """An mmdet detector, keeping one category (person).

    Args:
        config: mmdet config file (or Config), e.g. RTMDet-m person
            (``rtmdet_m_640-8xb32_coco-person.py``).
        checkpoint: Its weights, read by ``mmdet.apis.init_detector``
            through mmengine, whose local-file loading sapiens_mm routes
            through its safe loader. None keeps random weights (only useful
            for tests).
        device: Torch device.
        cat_ids: Category index (or indices) of "person" in the
            detector's classes. Defaults to 0 (COCO and the Sapiens RTMDet
            person detector).
        label: Its name for people to read (:attr:`label`); None: the
            config's file name.

    Scores are the detector's class scores in [0, 1]; the curation
    defaults follow the Sapiens paper (score above 0.9, box above 300 px).
    """
    default_score_thr = 0.9
    default_min_box_size = 300.0

    def __init__(self,
                 config,
                 checkpoint: Optional[str] = None,
                 device: str = 'cpu',
                 cat_ids: Union[int, Sequence[int]] = 0,
                 label: Optional[str] = None) -> None:
        try:
            from mmdet.apis import init_detector
        except ImportError as e:
            raise ImportError(
                'An mmdet detector config was given but mmdet cannot be '
                f'imported ({e}). Install it with `mim install "mmdet>=3.1"`'
                ' or use a built-in detector (detector="hog").') from e
        from mmengine.registry import DefaultScope

        import sapiens_mm  # noqa: F401  (safe checkpoint loading)
        for path, what in ((config, 'config'), (checkpoint, 'checkpoint')):
            if isinstance(path, str) and not osp.isfile(path):
                raise FileNotFoundError(f'Detector {what} not found: {path}')
        self.config, self.checkpoint = config, checkpoint
        self._label = label
        with DefaultScope.overwrite_default_scope('mmdet'):
            self.model = init_detector(config, checkpoint, device=device)
        self.cat_ids = tuple(
            int(c) for c in ((cat_ids, ) if isinstance(cat_ids, int) else
                             cat_ids))

    @property
    def label(self) -> str:
        """The ``label`` given, else the config's file name without its
        ending (``rtmdet_m_640-8xb32_coco-person``), else ``'mmdet
        detector'``."""
        if self._label:
            return self._label
        if isinstance(self.config, str):
            return osp.splitext(osp.basename(self.config))[0]
        return 'mmdet detector'

    def describe(self) -> dict:
        def where(f):
            return osp.abspath(f) if isinstance(f, str) else repr(f)

        return dict(name='mmdet',
                    config=where(self.config),
                    checkpoint=where(self.checkpoint),
                    person_labels=list(self.cat_ids))

    def __call__(self, img: np.ndarray) -> BoxesScores:
        from mmdet.apis import inference_detector
        from mmengine.registry import DefaultScope
        with DefaultScope.overwrite_default_scope('mmdet'):
            pred = inference_detector(self.model, img).pred_instances
        keep = torch.isin(pred.labels,
                          torch.tensor(self.cat_ids, device=pred.labels.device))
        return (pred.bboxes[keep].cpu().numpy().astype(np.float32),
                pred.scores[keep].cpu().numpy().astype(np.float32))


#: The registry name of the detector ``detector='auto'`` prefers.
AUTO_DETECTOR = 'rtmdet-m-person'


def mmdet_import_error() -> Optional[str]:
    """Why mmdet cannot run here (``'No module named mmdet'``, a version
    check of mmdet failing on import, ...), or None when ``mmdet.apis``
    imports."""
    import importlib.util
    if importlib.util.find_spec('mmdet') is None:
        return 'mmdet is not installed'
    try:
        import mmdet.apis  # noqa: F401
    except Exception as e:  # noqa: BLE001 (mmdet asserts mmcv versions)
        return f'mmdet does not import ({type(e).__name__}: ' \
            f'{" ".join(str(e).split())[:200]})'
    return None


def _fetch_problem(error: Exception) -> str:
    """Why the RTMDet-m weights could not be had, in a few words."""
    from sapiens_mm.zoo import (CorruptDownloadError, GatedModelError,
                                HubError, ModelFileMissingError)
    if isinstance(error, GatedModelError):
        return 'their Hub repository is gated (set HF_TOKEN)'
    if isinstance(error, CorruptDownloadError):
        return 'the download was corrupt'
    if isinstance(error, ModelFileMissingError):
        return 'their Hub repository lacks the file'
    if isinstance(error, HubError):
        return 'the Hugging Face Hub could not be reached'
    return (f'they could not be loaded ({type(error).__name__}: '
            f'{" ".join(str(error).split())[:80]})')


def _auto_detector(device: str, det_cat_ids: Union[int, Sequence[int]]
                   ) -> PersonDetector:
    """``detector='auto'``: the official RTMDet-m person detector when
    mmdet runs here and its weights are cached or can be downloaded, else
    OpenCV's HOG detector; one short log line says which and why (the
    details of a failed download at debug level)."""
    # the registry sits above this package: imported here
    from sapiens_mm.utils.commands import python_command
    from sapiens_mm.zoo import HubError, NotCachedError, fetch, find_card
    from sapiens_mm.zoo.hub import cached_file, is_offline
    card = find_card(AUTO_DETECTOR)
    download = f'`{python_command()} tools/download.py rtmdet-m`'
    problem, level = mmdet_import_error(), 20
    if problem is not None:
        fallback = 'mmdet not installed' if 'not installed' in problem \
            else 'mmdet does not import'
        problem += ' (RTMDet-m needs it: pip install mmdet)'
    elif is_offline() and cached_file(card) is None:
        fallback = 'RTMDet-m weights not cached'
        problem = (f"RTMDet-m's weights are not cached and HF_HUB_OFFLINE is "
                   f'set ({download} where the Hub is reachable)')
    else:
        try:
            weights = fetch(card)
            detector = MMDetPersonDetector(str(card.config), weights, device,
                                           det_cat_ids, label='RTMDet-m')
        except NotCachedError:
            fallback = 'RTMDet-m weights not cached'
            problem = (f"RTMDet-m's weights are not cached ({download} "
                       'where the Hub is reachable)')
        except (HubError, ImportError, OSError) as e:
            print_log(f'RTMDet-m person detector: {e}', logger='current',
                      level=10)
            fallback = 'RTMDet-m weights not downloaded'
            problem = (f"RTMDet-m's weights could not be fetched: "
                       f'{_fetch_problem(e)}; {download} gets them')
            level = 30
        else:
            print_log(f'Person detector: RTMDet-m ({card.repo_id}); '
                      '--detector hog for OpenCV\'s, without download.',
                      logger='current')
            return detector
    print_log(f'Person detector: OpenCV HOG, because {problem}.',
              logger='current', level=level)
    detector = OpenCVPersonDetector('hog')
    detector.fallback = fallback
    return detector


def build_person_detector(
        detector: Union[str, PersonDetector, None] = 'auto',
        det_model=None,
        det_weights: Optional[str] = None,
        device: str = 'cpu',
        det_cat_ids: Union[int, Sequence[int]] = 0
) -> Optional[PersonDetector]:
    """Build a person detector.

    Args:
        detector: ``'auto'`` (the default: the official Sapiens RTMDet-m
            person detector where mmdet runs and its weights are in the
            Hugging Face cache or can be downloaded, else ``'hog'``; one log
            line says which and why; a failed download falls back to HOG
            with a warning), ``'hog'`` or ``'haar'``
            (:class:`OpenCVPersonDetector`), ``'face'``
            (:class:`OpenCVFaceDetector`), ``'none'`` / None (no
            detector: user boxes or the whole image), a detection model of
            the registry (``'rtmdet-m'``: an :class:`MMDetPersonDetector` of
            its shipped config and its downloaded weights; a failed download
            is an error), or a :class:`PersonDetector`. Ignored when
            ``det_model`` is given.
        det_model: mmdet config (file or Config); with ``det_weights``,
            takes priority (the names of mmpose's ``Pose2DInferencer``).
        det_weights: mmdet checkpoint.
        device: Torch device of the mmdet model.
        det_cat_ids: Person category index (or indices) of the mmdet model.

    Returns:
        The detector, or None for no detector.

    Raises:
        ValueError: An unknown detector, or ``det_weights`` without
            ``det_model``.
        HubError: A registry detector named explicitly could not be
            downloaded (one line).
    """
    if det_model is not None:
        return MMDetPersonDetector(det_model, det_weights, device,
                                   det_cat_ids)
    if det_weights is not None:
        raise ValueError('det_weights needs det_model (the mmdet config '
                         'of that detector).')
    if isinstance(detector, PersonDetector):
        return detector
    if detector is None or detector == 'none':
        return None
    if detector == 'auto':
        return _auto_detector(device, det_cat_ids)
    if detector in ('hog', 'haar'):
        return OpenCVPersonDetector(detector)
    if detector == 'face':
        return OpenCVFaceDetector()
    # a detector of the model registry ('rtmdet-m'): its shipped mmdet
    # config and its weights, downloaded once (imported here: the registry
    # sits above this package)
    from sapiens_mm.zoo import fetch, lookup_card
    card = lookup_card(str(detector))
    if card is not None and card.task == 'detection':
        return MMDetPersonDetector(str(card.config), fetch(card), device,
                                   det_cat_ids, label=card.name)
    raise ValueError(f'Unknown detector {detector!r}: use "auto", "hog", '
                     '"haar", "face", "none", "rtmdet-m" (the official '
                     'Sapiens person detector, downloaded), a PersonDetector,'
                     ' or det_model / det_weights for an mmdet detector.')


def select_person_boxes(
        img: np.ndarray,
        detector: Optional[PersonDetector] = None,
        user_boxes: Optional[np.ndarray] = None,
        bbox_thr: float = 0.3,
        nms_thr: Optional[float] = 0.3) -> Tuple[np.ndarray, np.ndarray, str]:
    """The person boxes of one image, with the fallback order.

    1. ``user_boxes`` when given (N x 4 (x1, y1, x2, y2), or N x 5 with a
       score as the last column): clipped to the image, in the given order,
       no threshold / NMS (boxes entirely outside the image are dropped,
       with a warning).
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
        if not ok.all():
            outside = [arr[i, :4].tolist() for i in np.flatnonzero(~ok)]
            print_log(
                f'{len(outside)} of {len(arr)} person box(es) lie outside the '
                f'{shape[1]}x{shape[0]} image (e.g. {outside[0]}) and are '
                'dropped' + ('.' if ok.any() else
                             '; the detector (or the whole image) is used '
                             'instead.'), logger='current', level=30)
        if ok.any():  # user order kept
            return boxes[ok], scores[ok].astype(np.float32), 'user'
    if detector is not None:
        boxes, scores = detector(img)
        boxes, scores = filter_boxes(boxes, scores, shape, bbox_thr, nms_thr)
        if len(boxes):
            return boxes, scores, 'detector'
    return whole_image_box(shape), np.ones(1, np.float32), 'whole_image'


def check_boxes(boxes, where: str = 'bboxes') -> np.ndarray:
    """User boxes as a float32 (N, 4) or (N, 5) array, each one valid.

    Args:
        boxes: ``[[x1, y1, x2, y2(, score)], ...]`` in pixels.
        where: Whose boxes, for the message.

    Returns:
        The (N, 4|5) float32 array.

    Raises:
        ValueError: Another shape, or a box that is not finite, inverted
            (x2 < x1 or y2 < y1) or of zero area: the message names it
            (never dropped silently, which would fall back to the whole
            image).
    """
    try:
        arr = np.asarray(boxes, np.float32)
    except (ValueError, TypeError):
        raise ValueError(f'{where}: boxes must be numbers [[x1, y1, x2, y2'
                         f'(, score)], ...], got {boxes!r}.') from None
    if arr.ndim == 1 and arr.size in (4, 5):
        arr = arr[None]
    if arr.ndim != 2 or arr.shape[1] not in (4, 5):
        raise ValueError(f'{where}: boxes must be N x 4 (x1, y1, x2, y2) or '
                         f'N x 5 (+ score), got shape {arr.shape}.')
    for i, box in enumerate(arr):
        x1, y1, x2, y2 = (float(v) for v in box[:4])
        if not np.isfinite(box).all():
            why = 'has a non-finite value'
        elif x2 <= x1 or y2 <= y1:
            why = ('is inverted (x2 < x1 or y2 < y1)' if x2 < x1 or y2 < y1
                   else 'has zero area')
        else:
            continue
        raise ValueError(
            f'{where}: box {i} {box.tolist()} {why}; give [x1, y1, x2, y2] '
            'in pixels with x2 > x1 and y2 > y1.')
    return arr


def boxes_per_input(bboxes, num_inputs: int) -> List[Optional[np.ndarray]]:
    """The user's person boxes of each of ``num_inputs`` inputs.

    Args:
        bboxes: None; one N x 4 (x1, y1, x2, y2) or N x 5 (+ score) array
            used for every input; or a list with one such array (or None)
            per input.
        num_inputs: Number of inputs.

    Returns:
        One float32 array (or None) per input.

    Raises:
        ValueError: Another layout, or an invalid box
            (:func:`check_boxes`).
    """
    if bboxes is None:
        return [None] * num_inputs
    try:
        arr = np.asarray(bboxes, np.float32)
    except (ValueError, TypeError):  # ragged: one entry per input
        arr = None
    if arr is not None and (arr.ndim == 2 or
                            (arr.ndim == 1 and arr.size in (4, 5))):
        return [check_boxes(arr.reshape(-1, arr.shape[-1]))] * num_inputs
    if isinstance(bboxes, (list, tuple)) and len(bboxes) == num_inputs:
        return [
            None if b is None else check_boxes(b, f'input {i}')
            for i, b in enumerate(bboxes)
        ]
    raise ValueError(
        'bboxes must be one N x 4 (x1, y1, x2, y2) or N x 5 array used '
        f'for every input, or a list of {num_inputs} such arrays (or '
        'None), one per input.')
