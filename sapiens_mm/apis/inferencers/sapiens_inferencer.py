"""The multi-task inferencer: pose, body parts, depth and normals at once
(and Sapiens2's pointmaps, albedo and human matting).

:class:`SapiensInferencer` follows the conventions of mmengine's
``BaseInferencer`` and of ``MMPoseInferencer`` / ``MMSegInferencer``: build
it once from models, call it on inputs, get one result dict per image or
video frame, optionally written to ``out_dir``. It runs any combination of
the four tasks on the same inputs, decoding each image once; each task is
one single-task inferencer (:class:`~.pose_inferencer.PoseInferencer`,
:class:`~.dense_inferencer.DenseInferencer`, mmengine ``BaseInferencer``
subclasses of their own), used through its lower-level helpers
(``preprocess_images``, ``forward_batches``, ``to_arrays`` /
``keypoints_of``, ``draw``), and a batch goes through the same steps:
:meth:`SapiensInferencer.preprocess` (decoding, person boxes,
test pipelines; model-free), :meth:`~SapiensInferencer.forward` (the
models), :meth:`~SapiensInferencer.visualize` and
:meth:`~SapiensInferencer.postprocess` (result dict and files).

Example:
    >>> from sapiens_mm.apis import SapiensInferencer
    >>> inferencer = SapiensInferencer(models=[
    ...     'sapiens_0.3b_goliath_best_goliath_AP_573.pth',
    ...     'sapiens_0.3b_goliath_best_goliath_mIoU_7673_epoch_194.pth'])
    >>> results = inferencer('photo.jpg', out_dir='outputs')
    >>> results[0]['predictions']['pose']['keypoints'].shape
    (1, 308, 2)
"""
import os.path as osp
from concurrent.futures import Future, ThreadPoolExecutor
from typing import (
    Dict,
    Iterable,
    Iterator,
    List,
    Literal,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

import cv2
import numpy as np
import torch
from mmengine.config import Config
from mmengine.logging import print_log
from tqdm import tqdm

from sapiens_mm.datasets.keypoint_formats import EXPORT_FORMATS, convert_pose_record
from sapiens_mm.detection import PersonDetector, boxes_per_input
from sapiens_mm.tasks import MAP_TASKS, TASKS, Task
from sapiens_mm.tracking import (
    DepthStabilizer,
    NormalStabilizer,
    PointmapScaleStabilizer,
    PoseTracker,
    bboxes_from_keypoints,
)
from sapiens_mm.utils.foreground import person_cutouts, rgba_cutout, soft_foreground
from sapiens_mm.utils.matting import AlphaStabilizer, unpremultiply
from sapiens_mm.utils.pointcloud import write_ply
from sapiens_mm.visualization import SKELETON_STYLES, SkeletonStyle
from sapiens_mm.zoo import SapiensModelInfo

from ..inference import check_batch_size, resolve_device_and_dtype
from .base_task_inferencer import BaseTaskInferencer
from .dense_inferencer import (DENSE_TASKS, DenseInferencer,
                               matting_background, write_matting_files)
from .model_spec import ModelSpec, resolve_models
from .pose_inferencer import PoseInferencer, detector_arguments
from .utils.display import StopRequested, display_problem, show_images
from .utils.prefetch import in_background
from .utils.sources import (
    Frame,
    InputsType,
    Source,
    collect_sources,
    count_frames,
    iter_frames,
)
from .utils.writers import VideoWriters, write_json, write_npy, write_png

__all__ = ['SapiensInferencer']

def _nonfinite_counts(pred: dict) -> Dict[str, int]:
    """Per dense task of one frame's prediction, how many NaN / inf values
    the model produced (seg: its logits); tasks without any are left out."""
    counts = {}
    for task, sample in pred['samples'].items():
        field = {'seg': 'seg_logits', 'depth': 'pred_depth_map',
                 'normal': 'pred_normal_map', 'pointmap': 'pred_pointmap',
                 'albedo': 'pred_albedo_map',
                 'matting': 'pred_matting'}.get(task)
        data = getattr(sample, field, None) if field else None
        if data is None:
            continue
        n = int((~torch.isfinite(data.data)).sum())
        if n:
            counts[task] = n
    return counts


class _VideoState:
    """What the inferencer carries from frame to frame of one video or
    webcam: its pose tracker, dense stabilisers and last keypoints."""

    def __init__(self, source: Source, tracker: Optional[PoseTracker],
                 stabilize_alpha: Optional[float],
                 stabilize_matting: bool = False,
                 stabilize_pointmap_scale: bool = False) -> None:
        self.source = source
        self.tracker = tracker
        self.depth = self.normal = None
        if stabilize_alpha is not None:
            self.depth = DepthStabilizer(stabilize_alpha)
            self.normal = NormalStabilizer(stabilize_alpha)
        self.matting = AlphaStabilizer() if stabilize_matting else None
        self.pointmap_scale = PointmapScaleStabilizer() \
            if stabilize_pointmap_scale else None
        #: The last frame's (unsmoothed) keypoints, scores and track IDs.
        self.keypoints: Optional[np.ndarray] = None
        self.keypoint_scores: Optional[np.ndarray] = None
        self.track_ids: Optional[np.ndarray] = None
        #: The box each of the last frame's people last had from the
        #: detector (or the user, or the whole image): the size below which
        #: boxes made from keypoints do not shrink.
        self.detected_boxes: Optional[np.ndarray] = None


class SapiensInferencer:
    """Sapiens inference on images, folders, videos and webcams.

    Args:
        models: The models to run. Either a mapping ``{task: spec}`` with
            task ``'pose'``, ``'seg'``, ``'depth'`` or ``'normal'``, or a
            list of specs (or one spec) whose task is recognised. A spec is
            an official Sapiens checkpoint file alone (task and size from its
            name or, failing that, its weights; the shipped config is used),
            a config file (``.py``, random weights), a
            ``dict(config=..., checkpoint=...)`` or a ``(config,
            checkpoint)`` pair. The checkpoint may be a model exported by
            :func:`sapiens_mm.deploy.export_model` (``.onnx``, run with
            onnxruntime, or ``.pt2``): its task and config are read from the
            file, it runs in fp32 with the same pre- and post-processing.
        tasks: Tasks to run, a subset of the models' tasks. Defaults to all
            of them. A task without a model is an error.
        device: ``'cpu'``, ``'cuda'`` or ``'cuda:N'``. Defaults to CUDA when
            available.
        batch_size: Images (dense tasks) or person crops (pose) per forward
            pass. Defaults to 1. Results do not depend on it.
        dtype: ``'fp32'``, ``'bf16'``, ``'fp16'`` (autocast; fp16 is for
            GPUs) or ``'auto'``: bf16 where the CPU / GPU has native bf16,
            else fp32 (:func:`~sapiens_mm.apis.inference.auto_dtype`; the
            ``infer`` command's default; exported models stay float32).
            Defaults to ``'fp32'``.
        compile: ``torch.compile`` each model's backbone (the first batch at
            each input size pays for the compilation; needs a C++ compiler
            on CPU). Outputs match eager within float rounding (see
            ``tests/apis/test_fast_inference.py``). Defaults to False.
        detector: Person detector of the pose task when no mmdet config is
            given: ``'hog'`` (OpenCV HOG pedestrian detector, the default),
            ``'haar'`` (OpenCV full-body cascade), ``'none'`` or a
            :class:`~sapiens_mm.detection.PersonDetector`.
        det_model: mmdet detector config (takes priority over
            ``detector``), e.g. the official RTMDet-m person detector; the
            detector arguments are named as in mmpose's
            ``Pose2DInferencer``.
        det_weights: Its checkpoint.
        det_cat_ids: Person class index (or indices) of the mmdet detector.
            Defaults to 0.
        bbox_thr: Minimum detector score of a person box. Defaults to 0.3.
        nms_thr: IoU threshold of the box NMS. Defaults to 0.3.
        kpt_thr: Keypoints below this score are not drawn. Defaults to 0.3.
        track: On videos and webcams, give each person a track ID that stays
            the same from frame to frame
            (:class:`~sapiens_mm.tracking.PoseTracker`: box IoU and
            keypoint OKS). Defaults to True.
        smooth: On videos and webcams, smooth each track's keypoints with a
            One-Euro filter (needs ``track``; still images are never
            smoothed). Defaults to True.
        det_interval: On videos and webcams, run the person detector every
            N frames only; the frames between take their boxes from the
            previous frame's keypoints (as rtmlib's ``PoseTracker``), at
            least a quarter of the width and height of each person's last
            detected box; when someone's keypoint box degenerates (under a
            tenth of it) or is lost, the detector runs on that frame.
            Defaults to 1 (every frame).
        tracker_cfg: Settings of the tracker and its filter (``iou_weight``,
            ``match_thr``, ``birth_thr``, ``max_age``, ``min_cutoff``,
            ``beta``, ``d_cutoff``); see
            :class:`~sapiens_mm.tracking.PoseTracker`.
        stabilize_dense: On videos, stabilise depth (aligned to the previous
            frame by a least-squares scale and shift on the foreground, then
            averaged) and normals (averaged, renormalised) over time.
            Defaults to False.
        stabilize_alpha: Weight of the new frame in that average, in
            (0, 1]. Defaults to 0.5.
        mask_with: What masks the depth / normal / pointmap / albedo
            outputs outside the person: ``'matting'`` (the matting model's
            alpha: arrays NaN where alpha < 0.5, visualisations blended to
            black with the soft alpha) or ``'seg'`` (body-part labels > 0).
            None (default): the matting model when there is one, else the
            seg model when there is one, else nothing.
        stabilize_matting: On videos, smooth the alpha over time
            (:class:`~sapiens_mm.utils.matting.AlphaStabilizer`; the
            foreground is re-multiplied by the smoothed alpha). Defaults to
            False.
        stabilize_pointmap_scale: On videos, bring the pointmaps to a
            temporally smooth scale
            (:class:`~sapiens_mm.tracking.PointmapScaleStabilizer`); each
            frame's measured and applied scale is returned as
            ``predictions['pointmap_scale']`` and written to
            ``pointmap/<name>/<frame>_scale.json``. Defaults to False.
        whole_image_fallback: When the person detector finds no one in an
            image, run pose on the whole image (the default; said once per
            call, as the pose may then be drawn on no one). False: no pose
            for such images.
        det_config, det_checkpoint, det_cat_id: Deprecated spellings of
            ``det_model``, ``det_weights``, ``det_cat_ids``.

    Person boxes come from, in order: boxes given to ``__call__``; else the
    detector (score >= ``bbox_thr``, NMS; on video every ``det_interval``
    frames, the previous frame's keypoints between); else the whole image
    (unless ``whole_image_fallback`` is off). Keypoints are returned in
    original image pixels.

    Each call says once, in the log, when the detector found no one (and
    the whole image was used), and when every keypoint of an image scored
    below ``kpt_thr`` (so none is drawn), with a threshold that would draw
    them.

    Decoding, person detection and pre-processing of the next batch run in
    a worker thread while the models run on the current one, and the
    previous batch's results are written in another (OpenCV and PyTorch
    release the GIL); results are still yielded in input order, each once
    its files are written. With ``show`` everything runs in the calling
    thread (OpenCV windows need it).
    """

    def __init__(self,
                 models: Union[Mapping[str, ModelSpec], Sequence[ModelSpec],
                               ModelSpec],
                 tasks: Optional[Sequence[Task]] = None,
                 device: Optional[str] = None,
                 batch_size: int = 1,
                 dtype: Literal['auto', 'fp32', 'bf16', 'fp16'] = 'fp32',
                 compile: bool = False,
                 detector: Union[str, PersonDetector, None] = 'hog',
                 det_model: Optional[Union[str, Config]] = None,
                 det_weights: Optional[str] = None,
                 det_cat_ids: Union[int, Sequence[int]] = 0,
                 bbox_thr: float = 0.3,
                 nms_thr: float = 0.3,
                 kpt_thr: float = 0.3,
                 track: bool = True,
                 smooth: bool = True,
                 det_interval: int = 1,
                 tracker_cfg: Optional[dict] = None,
                 stabilize_dense: bool = False,
                 stabilize_alpha: float = 0.5,
                 mask_with: Optional[Literal['matting', 'seg']] = None,
                 stabilize_matting: bool = False,
                 stabilize_pointmap_scale: bool = False,
                 whole_image_fallback: bool = True,
                 *,
                 det_config: Optional[Union[str, Config]] = None,
                 det_checkpoint: Optional[str] = None,
                 det_cat_id: Optional[int] = None) -> None:
        det_model, det_weights, det_cat_ids = detector_arguments(
            det_model, det_weights, det_cat_ids, det_config, det_checkpoint,
            det_cat_id)
        self.device, self.dtype = resolve_device_and_dtype(device, dtype)
        self.batch_size = self.check_batch_size(batch_size)
        resolved = resolve_models(models, tasks)
        #: The single-task inferencers, in :data:`TASKS` order.
        self.task_inferencers: Dict[str, BaseTaskInferencer] = {}
        for task in TASKS:
            if task not in resolved:
                continue
            spec = resolved[task]
            if task == 'pose':
                self.task_inferencers[task] = PoseInferencer(
                    model=spec.cfg,
                    weights=spec.weights,
                    device=self.device,
                    dtype=dtype,
                    info=spec.info,
                    detector=detector,
                    det_model=det_model,
                    det_weights=det_weights,
                    det_cat_ids=det_cat_ids,
                    bbox_thr=bbox_thr,
                    nms_thr=nms_thr,
                    kpt_thr=kpt_thr,
                    whole_image_fallback=whole_image_fallback)
            else:
                self.task_inferencers[task] = DenseInferencer(
                    model=spec.cfg,
                    weights=spec.weights,
                    device=self.device,
                    dtype=dtype,
                    info=spec.info)
        self.tasks = tuple(self.task_inferencers)
        if compile:
            for ti in self.task_inferencers.values():
                ti.compile()
        #: (input, reason) of every input skipped by the last call.
        self.skipped: List[Tuple[str, str]] = []
        if isinstance(det_interval, bool) or not isinstance(
                det_interval, int) or det_interval < 1:
            raise ValueError(f'det_interval must be a positive int (run the '
                             f'detector every N frames), got '
                             f'{det_interval!r}.')
        self.track, self.det_interval = bool(track), det_interval
        self.kpt_thr = kpt_thr
        self.tracker_cfg = dict(tracker_cfg or {}, smooth=bool(smooth))
        unknown = set(self.tracker_cfg) - {
            'iou_weight', 'match_thr', 'birth_thr', 'max_age', 'min_cutoff',
            'beta', 'd_cutoff', 'smooth'
        }
        if unknown:
            raise ValueError(f'Unknown tracker_cfg keys {sorted(unknown)}; '
                             'see sapiens_mm.tracking.PoseTracker.')
        if self.track and 'pose' in self.task_inferencers:
            self._new_tracker()  # validates the settings now
        self.stabilize_alpha = None
        if stabilize_dense:
            DepthStabilizer(stabilize_alpha)  # validates alpha
            self.stabilize_alpha = float(stabilize_alpha)
        self.mask_with = self._mask_source(mask_with)
        self.stabilize_matting = bool(stabilize_matting)
        self.stabilize_pointmap_scale = bool(stabilize_pointmap_scale)
        self._video: Optional[_VideoState] = None
        #: What the current call has said once (see :meth:`_say_once`).
        self._said: set = set()

    def _mask_source(self, mask_with: Optional[str]) -> Optional[str]:
        """The task whose output masks the dense outputs (see
        ``mask_with``), checked against the models."""
        if mask_with is None:
            return next((t for t in ('matting', 'seg')
                         if t in self.task_inferencers), None)
        if mask_with not in ('matting', 'seg'):
            raise ValueError(f'mask_with must be "matting" or "seg", got '
                             f'{mask_with!r}.')
        if mask_with not in self.task_inferencers:
            raise ValueError(
                f'mask_with={mask_with!r} (--mask-with) needs a {mask_with} '
                f'model: give --{mask_with} or a {mask_with} checkpoint.')
        return mask_with

    # ------------------------------------------------------------ set-up
    #: ``batch_size`` if it is a positive int, else a ``ValueError``
    #: (:func:`~sapiens_mm.apis.inference.check_batch_size`).
    check_batch_size = staticmethod(check_batch_size)

    @property
    def models(self) -> Dict[str, torch.nn.Module]:
        """The loaded models by task (an exported model is a
        :class:`sapiens_mm.deploy.ExportedModel`)."""
        return {t: ti.model for t, ti in self.task_inferencers.items()}

    @property
    def model_infos(self) -> Dict[str, Optional[SapiensModelInfo]]:
        """Recognised task / size / dataset of each model loaded from an
        official checkpoint alone (None for models given with a config)."""
        return {t: ti.info for t, ti in self.task_inferencers.items()}

    @property
    def detector(self) -> Optional[PersonDetector]:
        """The person detector of the pose task (None without pose or
        without a detector)."""
        pose = self.task_inferencers.get('pose')
        return pose.detector if pose is not None else None

    def _new_tracker(self) -> PoseTracker:
        meta = self.task_inferencers['pose'].dataset_meta
        sigmas = meta.get('sigmas')
        return PoseTracker(
            sigmas=None if sigmas is None or not len(sigmas) else sigmas,
            kpt_thr=self.kpt_thr, **self.tracker_cfg)

    def _video_state(self, src: Source) -> Optional[_VideoState]:
        """The frame-to-frame state of a video / webcam source (a new one
        when the source changes); None for images."""
        if src.kind not in ('video', 'webcam'):
            return None
        if self._video is None or self._video.source is not src:
            tracker = self._new_tracker() if (
                self.track and 'pose' in self.task_inferencers) else None
            self._video = _VideoState(src, tracker, self.stabilize_alpha,
                                      self.stabilize_matting,
                                      self.stabilize_pointmap_scale)
        return self._video

    def _say_once(self, key: str, message: str) -> None:
        """Log ``message`` unless this call has said ``key`` already."""
        if key not in self._said:
            self._said.add(key)
            print_log(message + ' (Said once per run.)', logger='current',
                      level=30)

    def _pose_notices(self, where: str, pose: dict) -> None:
        """Say the fallbacks of one frame's pose: the whole image used as
        the person box, no person, every keypoint below ``kpt_thr``."""
        detector = self.detector
        if pose['bbox_source'] == 'whole_image' and detector is not None:
            self._say_once(
                'whole_image',
                f'{where}: the person detector ({type(detector).__name__}) '
                'found no one, so pose ran on the whole image as one person '
                '(its skeleton may be drawn on no one). whole_image_fallback='
                'False (CLI: --no-whole-image-fallback) leaves such images '
                'without pose; bbox_source in the pose JSON says which box '
                'each image used.')
        elif pose['bbox_source'] == 'none':
            self._say_once(
                'no_person', f'{where}: the person detector found no one: no '
                'pose for this image (whole_image_fallback is off).')
        scores = np.asarray(pose['keypoint_scores'], np.float32)
        finite = scores[np.isfinite(scores)]
        if finite.size and not (finite >= self.kpt_thr).any():
            # about half the keypoints score at least the median
            suggest = max(0.01, np.floor(np.median(finite) * 100) / 100)
            self._say_once(
                'kpt_thr',
                f'{where}: every keypoint scored below the drawing threshold '
                f'kpt_thr={self.kpt_thr:g} (highest {finite.max():.2f}), so '
                f'no keypoint is drawn; kpt_thr={suggest:g} (CLI: --kpt-thr '
                f'{suggest:g}) draws about half of them. Scores this low '
                'mean the model is unsure: an untrained model, or no person '
                'in the box.')

    def _skip(self, src: Source, reason: str) -> None:
        name = src.path or src.name
        self.skipped.append((name, reason))
        print_log(f'Skipped {name}: {reason}.', logger='current', level=30)

    # ------------------------------------------------------------ call
    def __call__(self,
                 inputs: InputsType,
                 out_dir: Optional[str] = None,
                 batch_size: Optional[int] = None,
                 bboxes=None,
                 return_vis: bool = False,
                 return_datasamples: bool = False,
                 no_save_pred: bool = False,
                 no_save_vis: bool = False,
                 show: bool = False,
                 wait_time: int = 1,
                 draw_bbox: bool = True,
                 max_frames: Optional[int] = None,
                 show_progress: bool = True,
                 skeleton_style: SkeletonStyle = 'mmpose',
                 export_formats: Sequence[str] = (),
                 save_mask: bool = False,
                 background=None,
                 alpha_bits: int = 8) -> List[dict]:
        """Run the tasks on ``inputs`` and return one result per image or
        video frame. See :meth:`stream` for the arguments and results; this
        collects them in a list (use :meth:`stream` for webcams and long
        videos)."""
        return list(
            self.stream(inputs,
                        out_dir=out_dir,
                        batch_size=batch_size,
                        bboxes=bboxes,
                        return_vis=return_vis,
                        return_datasamples=return_datasamples,
                        no_save_pred=no_save_pred,
                        no_save_vis=no_save_vis,
                        show=show,
                        wait_time=wait_time,
                        draw_bbox=draw_bbox,
                        max_frames=max_frames,
                        show_progress=show_progress,
                        skeleton_style=skeleton_style,
                        export_formats=export_formats,
                        save_mask=save_mask,
                        background=background,
                        alpha_bits=alpha_bits))

    def stream(self,
               inputs: InputsType,
               out_dir: Optional[str] = None,
               batch_size: Optional[int] = None,
               bboxes=None,
               return_vis: bool = False,
               return_datasamples: bool = False,
               no_save_pred: bool = False,
               no_save_vis: bool = False,
               show: bool = False,
               wait_time: int = 1,
               draw_bbox: bool = True,
               max_frames: Optional[int] = None,
               show_progress: bool = True,
               skeleton_style: SkeletonStyle = 'mmpose',
               export_formats: Sequence[str] = (),
               save_mask: bool = False,
               background=None,
               alpha_bits: int = 8) -> Iterator[dict]:
        """Run the tasks on ``inputs``, yielding one result per image or
        video frame as soon as it is ready.

        Args:
            inputs: An image / video / folder path, a BGR uint8 array
                (as from ``cv2.imread``), a webcam index (``0``, ``'0'``,
                ``'webcam'``, ``'webcam:1'``) or a list of these. Folders are
                searched recursively for images; unreadable files are
                reported (see :attr:`skipped`) and skipped.
            out_dir: Where to write predictions and visualisations (nothing
                is written when None). Layout: ``<out_dir>/<task>/<name>``
                ``.json`` (pose, COCO-style), ``.npy`` (seg labels uint8,
                depth float32 HxW, normals float32 HxWx3; at the original
                resolution) and ``.png`` (visualisation); for a video,
                per-frame files in ``<task>/<name>/<frame:06d>.*`` and the
                visualisation ``<task>/<name>.mp4`` (same frame count and
                rate). ``<name>`` is the file stem (relative path inside a
                folder input).
            batch_size: Overrides the inferencer's batch size.
            bboxes: Person boxes for pose, in image pixels: one N x 4
                (x1, y1, x2, y2) or N x 5 (+ score) array for every input, or
                a list with one such array (or None) per input.
            return_vis: Add the visualisations (BGR arrays) to the results.
            return_datasamples: Add the raw data samples of each task.
            no_save_pred: Do not write predictions to ``out_dir``.
            no_save_vis: Do not write visualisations to ``out_dir``.
            show: Show the visualisations in windows (``q`` / Esc stops);
                a ``RuntimeError`` before anything runs when no window can
                open (no display, or a headless OpenCV).
            wait_time: ``cv2.waitKey`` time when showing, in ms.
            draw_bbox: Draw person boxes on the pose visualisation.
            max_frames: Read at most this many frames of each video /
                webcam (None: all; a webcam runs until stopped).
            show_progress: Show a progress bar.
            skeleton_style: ``'mmpose'`` (skeletons over the image in the
                layout's colours) or ``'openpose'`` (ControlNet-style
                skeletons on a black canvas; 17, 133 and 308 keypoints).
            export_formats: Also write each frame's pose in these formats
                (``'coco17'``, ``'coco_wholebody'``, ``'openpose'``; see
                :mod:`sapiens_mm.datasets.keypoint_formats`) to
                ``<out_dir>/pose_<format>/<name>.json``.
            save_mask: Person foreground from the seg model: the soft mask
                (``predictions['foreground']``, (H, W) float32 in [0, 1])
                and, with ``out_dir``, ``mask/<name>.png`` (the soft mask
                x 255), ``mask/<name>_rgba.png`` (the image with that alpha)
                and ``mask/<name>_person<i>.png`` (one cut-out per pose box,
                when pose runs).
            background: What a matting model's person is composited onto
                in its visualisation (``matting/<name>.png``, or the
                video ``matting/<name>.mp4``: a green-screen cut-out by
                default): a colour (name, ``#RRGGBB``, ``R,G,B``), an image
                file or a BGR array.
            alpha_bits: Bit depth of the matting alpha PNGs
                (``matting/<name>_alpha.png``), 8 or 16. Defaults to 8.

        Yields:
            dict: ``input`` (path or name), ``name``, ``frame_index`` (None
            for images), ``img_shape`` (H, W) and ``predictions`` with, per
            task: ``pose``: dict(``skeleton``, ``bboxes`` (N, 4) xyxy,
            ``bbox_scores`` (N,), ``bbox_source`` ('user' / 'detector' /
            'whole_image', or 'keypoints' for the previous frame's on a
            frame without detection), ``keypoints`` (N, K, 2),
            ``keypoint_scores`` (N, K), on video ``track_ids`` (N,));
            ``seg``: (H, W) uint8 labels; ``depth``: (H, W)
            float32 relative depth (larger = farther); ``normal``: (H, W, 3)
            float32 unit normals; Sapiens2 ``pointmap``: (H, W, 3) float32
            metric camera-frame XYZ, ``albedo``: (H, W, 3) float32 RGB,
            ``matting``: (H, W, 4) float32, the pre-multiplied foreground
            RGB and alpha in [0, 1] (written as ``.npy``, ``_alpha.png`` and
            the RGBA cut-out ``_rgba.png``).
            When matting or seg ran (see ``mask_with``), depth, normals,
            pointmaps and albedo are NaN outside the person. Also
            ``pred_files``
            and ``vis_files`` ({task: path} of what was written; a pointmap
            adds ``pointmap_ply``, the coloured point cloud of its finite
            points), ``nonfinite`` ({task: number of NaN / inf values the
            model output}, empty when all are finite; each such frame is also
            logged as a warning), plus ``visualization`` / ``datasamples``
            when asked. Two inputs with the same name get distinct output
            names (``x``, ``x_1``...: see ``name``, and the log).
        """
        batch_size = self.check_batch_size(batch_size or self.batch_size)
        self._check_output_options(skeleton_style, export_formats, save_mask)
        if alpha_bits not in (8, 16):
            raise ValueError(f'alpha_bits must be 8 or 16, got '
                             f'{alpha_bits!r}.')
        if background is not None and 'matting' not in self.task_inferencers:
            raise ValueError('background (--background) is what a matting '
                             'model composites the person onto: give a '
                             'matting model too (--matting).')
        background = matting_background(background)
        if show:
            problem = display_problem()
            if problem:
                raise RuntimeError(
                    f'show=True needs a window, but {problem}; call without '
                    'show (out_dir keeps the results).')
        self.skipped = []
        self._video = None
        self._said = set()
        sources = collect_sources(inputs)
        if not sources:
            raise ValueError('No input given.')
        user_boxes = boxes_per_input(bboxes,
                                     max(s.index for s in sources) + 1)
        total = count_frames(sources, max_frames)
        opts = dict(out_dir=out_dir, return_vis=return_vis,
                    return_datasamples=return_datasamples,
                    save_pred=out_dir is not None and not no_save_pred,
                    save_vis=out_dir is not None and not no_save_vis,
                    show=show, wait_time=wait_time, draw_bbox=draw_bbox,
                    skeleton_style=skeleton_style,
                    export_formats=tuple(export_formats),
                    save_mask=save_mask, background=background,
                    alpha_bits=alpha_bits)
        videos = VideoWriters()
        bar = tqdm(total=total, desc='Sapiens inference', unit='img',
                   disable=not show_progress or total == 1)
        overlap = not show
        batches = self._prepared_batches(sources, max_frames, bar,
                                         batch_size, user_boxes)
        if overlap:
            batches = in_background(batches)
        writer_pool = ThreadPoolExecutor(
            1, thread_name_prefix='sapiens-write') if overlap else None
        pending: Optional[Future] = None
        failed = True  # until the loop ends normally or is stopped
        try:
            for prepared in batches:
                batch = prepared['batch']
                preds = self.forward(prepared, batch_size)
                if writer_pool is None:
                    for frame, pred in zip(batch, preds):
                        result = self.postprocess(frame, pred, videos, opts)
                        bar.update(1)
                        yield result
                    continue
                # Write this batch while the next one runs; hand out the
                # previous batch's results (their files are written).
                future = writer_pool.submit(self._postprocess_batch, batch,
                                            preds, videos, opts)
                if pending is not None:
                    yield from self._finished(pending, bar)
                pending = future
            if pending is not None:
                done, pending = pending, None
                yield from self._finished(done, bar)
            failed = False
        except StopRequested:
            failed = False
            return
        except GeneratorExit:  # the caller stopped iterating: keep videos
            failed = False
            raise
        finally:
            batches.close()
            if writer_pool is not None:
                writer_pool.shutdown(wait=True)
            bar.close()
            # A run that failed (e.g. a full disk) leaves no video that may
            # be truncated under its final name.
            if failed:
                videos.discard()
            else:
                videos.release()
            if show:
                cv2.destroyAllWindows()

    def _check_output_options(self, skeleton_style: str,
                              export_formats: Sequence[str],
                              save_mask: bool) -> None:
        if skeleton_style not in SKELETON_STYLES:
            raise ValueError(f'skeleton_style must be one of '
                             f'{", ".join(SKELETON_STYLES)}, got '
                             f'{skeleton_style!r}.')
        if isinstance(export_formats, str):
            raise TypeError('export_formats is a list of formats, e.g. '
                            f'[{export_formats!r}].')
        unknown = [f for f in export_formats if f not in EXPORT_FORMATS]
        if unknown:
            raise ValueError(f'Unknown export format(s) {unknown}; choose '
                             f'from {", ".join(EXPORT_FORMATS)}.')
        if export_formats and 'pose' not in self.task_inferencers:
            raise ValueError('Exporting keypoint formats needs a pose model '
                             '(give --pose or a pose checkpoint).')
        if save_mask and 'seg' not in self.task_inferencers:
            raise ValueError('The foreground mask (save_mask / --save-mask) '
                             'comes from the segmentation: give a seg model '
                             'too (--seg or a seg checkpoint).')

    def _prepared_batches(self, sources: List[Source],
                          max_frames: Optional[int], bar: tqdm,
                          batch_size: int, user_boxes) -> Iterator[dict]:
        def skip(src: Source, reason: str) -> None:
            self._skip(src, reason)
            if src.kind == 'image':
                bar.update(1)

        batch: List[Frame] = []
        for frame in iter_frames(sources, max_frames, skip):
            batch.append(frame)
            if len(batch) == batch_size:
                yield self.preprocess(batch, user_boxes)
                batch = []
        if batch:
            yield self.preprocess(batch, user_boxes)

    def _postprocess_batch(self, batch: List[Frame], preds: List[dict],
                           videos: VideoWriters, opts: dict) -> List[dict]:
        return [
            self.postprocess(frame, pred, videos, opts)
            for frame, pred in zip(batch, preds)
        ]

    @staticmethod
    def _finished(future: Future, bar: tqdm) -> Iterable[dict]:
        for result in future.result():
            bar.update(1)
            yield result

    # ------------------------------------------------------------ steps
    def preprocess(self, batch: List[Frame], user_boxes) -> dict:
        """Pre-processing of a batch of frames, model-free (the stream runs
        it in a worker thread): each dense task's test pipeline, and for
        pose the person boxes (detector) and crops.

        Args:
            batch: The frames.
            user_boxes: Boxes given per input (index = ``Source.index``),
                None entries for none.

        Returns:
            ``dict(batch=batch, dense={task: packed}, pose=prepared)``.
        """
        images = [f.image for f in batch]
        prepared = dict(batch=batch, dense={}, pose=None)
        for task in DENSE_TASKS:
            if task in self.task_inferencers:
                prepared['dense'][task] = self.task_inferencers[
                    task].preprocess_images(images)
        if 'pose' in self.task_inferencers:
            # Frames without detection (det_interval) are prepared in
            # forward(): their boxes come from the previous frame's result.
            ready = [
                i for i, f in enumerate(batch)
                if not self._boxes_from_last_frame(f, user_boxes)
            ]
            prepared['pose_frames'] = ready
            prepared['pose'] = self.task_inferencers['pose'].preprocess_images(
                [images[i] for i in ready],
                [batch[i].source.name for i in ready],
                [user_boxes[batch[i].source.index] for i in ready])
        return prepared

    def _boxes_from_last_frame(self, frame: Frame, user_boxes) -> bool:
        """Whether ``frame`` takes its person boxes from the previous
        frame's keypoints instead of the detector (det_interval)."""
        return (self.det_interval > 1
                and frame.source.kind in ('video', 'webcam')
                and user_boxes[frame.source.index] is None
                and frame.frame_index % self.det_interval != 0)

    def forward(self, prepared: dict, batch_size: int) -> List[dict]:
        """Run the models on a :meth:`preprocess` output.

        Returns:
            Per frame, each task's prediction (``seg`` / ``depth`` /
            ``normal`` arrays, ``pose`` dict) and ``samples`` ({task: data
            samples}). When seg ran, depth and normals are NaN outside the
            person foreground.
        """
        preds: List[dict] = [dict(samples={}) for _ in prepared['batch']]
        for task in DENSE_TASKS:
            if task not in self.task_inferencers:
                continue
            ti = self.task_inferencers[task]
            samples = ti.forward_batches(prepared['dense'][task], batch_size)
            for pred, sample, arr in zip(preds, samples,
                                         ti.to_arrays(samples)):
                pred['samples'][task] = sample
                pred[task] = arr
        for pred in preds:  # before the seg mask adds NaNs on purpose
            pred['nonfinite'] = _nonfinite_counts(pred)
        for pred in preds:  # the person foreground masks the dense outputs
            alpha = self.person_alpha(pred)
            if alpha is not None:
                background = alpha < 0.5
                for task in MAP_TASKS:
                    if task in pred:
                        pred[task][background] = np.nan
        ready = {}
        if 'pose' in self.task_inferencers:
            ti = self.task_inferencers['pose']
            samples = ti.forward_batches(prepared['pose']['packed'],
                                         batch_size)
            ready = dict(zip(prepared['pose_frames'],
                             ti.keypoints_of(prepared['pose'], samples)))
        # In frame order: each frame's tracking needs the previous frame's.
        for i, (frame, pred) in enumerate(zip(prepared['batch'], preds)):
            if 'pose' in self.task_inferencers:
                out = ready.get(i) or self._pose_from_last_frame(
                    frame, batch_size)
                pred['pose'] = out['pose']
                pred['samples']['pose'] = out['samples']
                bad = sum(int((~np.isfinite(out['pose'][k])).sum())
                          for k in ('keypoints', 'keypoint_scores'))
                if bad:
                    pred['nonfinite']['pose'] = bad
            self._follow(frame, pred)
        return preds

    def person_alpha(self, pred: dict) -> Optional[np.ndarray]:
        """(H, W) float32 alpha of the person in one frame's prediction:
        the matting alpha or the seg foreground (labels > 0, as 0 / 1),
        as ``mask_with`` picks; None without either."""
        if self.mask_with == 'matting' and 'matting' in pred:
            return pred['matting'][..., 3]
        if self.mask_with == 'seg' and 'seg' in pred:
            return (pred['seg'] > 0).astype(np.float32)
        return None

    def _pose_from_last_frame(self, frame: Frame, batch_size: int) -> dict:
        """Pose of a frame without detection: boxes around the previous
        frame's people, at least a quarter of the size of each one's last
        detected box; the detector runs instead when there were none, or when
        anyone's keypoint box degenerated (see
        :func:`~sapiens_mm.tracking.bboxes_from_keypoints`)."""
        ti = self.task_inferencers['pose']
        state = self._video_state(frame.source)
        boxes = None
        if state.keypoints is not None and len(state.keypoints):
            boxes, keep = bboxes_from_keypoints(
                state.keypoints, state.keypoint_scores, self.kpt_thr,
                img_shape=frame.image.shape[:2],
                reference_boxes=state.detected_boxes)
            if len(keep) < len(state.keypoints):
                boxes = None  # someone was lost or degenerate: detect
        prepared = ti.preprocess_images([frame.image], [frame.source.name],
                                        [boxes])
        out = ti.keypoints_of(
            prepared, ti.forward_batches(prepared['packed'], batch_size))[0]
        if boxes is not None:
            out['pose']['bbox_source'] = 'keypoints'
            out['pose']['detected_boxes'] = state.detected_boxes[keep]
            if state.track_ids is not None:  # each box's track is known
                out['pose']['known_ids'] = state.track_ids[keep]
        return out

    def _follow(self, frame: Frame, pred: dict) -> None:
        """Video only: track IDs and smoothed keypoints for the pose,
        stabilised depth and normals."""
        state = self._video_state(frame.source)
        if state is None:
            return
        t = frame.frame_index / frame.source.fps
        pose = pred.get('pose')
        if pose is not None:
            known = pose.pop('known_ids', None)
            detected = pose.pop('detected_boxes', None)
            state.detected_boxes = np.asarray(
                pose['bboxes'] if detected is None else detected,
                np.float32).reshape(-1, 4)
            state.keypoints = pose['keypoints']
            state.keypoint_scores = pose['keypoint_scores']
            if state.tracker is not None:
                ids, keypoints = state.tracker.update(
                    pose['bboxes'], pose['keypoints'],
                    pose['keypoint_scores'], t, known)
                pose['track_ids'] = state.track_ids = ids
                pose['keypoints'] = keypoints
        if state.depth is not None and 'depth' in pred:
            pred['depth'] = state.depth(pred['depth'])
        if state.normal is not None and 'normal' in pred:
            pred['normal'] = state.normal(pred['normal'])
        if state.matting is not None and 'matting' in pred:
            matte = pred['matting']
            alpha = state.matting(matte[..., 3])
            # keep the foreground colour, re-multiplied by the new alpha
            colour = unpremultiply(matte[..., :3], matte[..., 3])
            pred['matting'] = np.concatenate(
                [colour * alpha[..., None], alpha[..., None]], -1)
        if state.pointmap_scale is not None and 'pointmap' in pred:
            pred['pointmap'] = state.pointmap_scale(pred['pointmap'], t)
            pred['pointmap_scale'] = dict(
                measured=state.pointmap_scale.measured,
                applied=state.pointmap_scale.smoothed)

    def visualize(self, frame: Frame, pred: dict,
                  draw_bbox: bool = True,
                  skeleton_style: SkeletonStyle = 'mmpose',
                  background=None) -> Dict[str, np.ndarray]:
        """BGR visualisation of each task's prediction for one frame: the
        pose in ``skeleton_style``, the matte composited onto
        ``background`` (green screen when None), depth / normals /
        pointmaps / albedo outside the person (``mask_with``) black,
        blended with the matting alpha where it is soft (the picture; the
        key panels beside it stay as drawn)."""
        alpha = self.person_alpha(pred)
        fg = None if alpha is None else alpha >= 0.5
        vis = {}
        for task, ti in self.task_inferencers.items():
            if task == 'pose':
                vis[task] = ti.draw(frame.image, pred['pose'], draw_bbox,
                                    skeleton_style)
            elif task == 'seg':
                vis[task] = ti.draw(frame.image, pred['seg'])
            elif task == 'matting':
                vis[task] = ti.draw(frame.image, pred['matting'],
                                    background=background)
            else:
                vis[task] = ti.draw(frame.image, pred[task], fg)
                if alpha is not None:  # the picture, not its key panel
                    h, w = alpha.shape
                    vis[task][:h, :w] = np.rint(
                        vis[task][:h, :w] * alpha[..., None]).astype(np.uint8)
        return vis

    def postprocess(self, frame: Frame, pred: dict, videos: VideoWriters,
                    opts: dict) -> dict:
        """Write files, show and assemble the result dict of one frame."""
        src = frame.source
        video = src.kind in ('video', 'webcam')
        stem = (f'{src.name}/{frame.frame_index:06d}' if video else src.name)
        result = dict(
            input=src.path if src.path is not None else src.name,
            name=src.name,
            frame_index=frame.frame_index,
            img_shape=tuple(frame.image.shape[:2]),
            predictions={t: pred[t]
                         for t in self.tasks},
            pred_files={},
            vis_files={},
            nonfinite=dict(pred.get('nonfinite') or {}))
        if 'pointmap_scale' in pred:
            result['predictions']['pointmap_scale'] = pred['pointmap_scale']
        if result['nonfinite']:
            where = result['input'] if frame.frame_index is None else \
                f'{result["input"]} frame {frame.frame_index}'
            outputs = ', '.join(f'{t} output ({n} values)'
                                for t, n in result['nonfinite'].items())
            print_log(
                f'{where}: non-finite (NaN / inf) values in the {outputs}; '
                'the model weights or the input may be corrupt.',
                logger='current', level=30)
        if 'pose' in pred:
            where = result['input'] if frame.frame_index is None else \
                f'{result["input"]} frame {frame.frame_index}'
            self._pose_notices(where, pred['pose'])
        out_dir = opts['out_dir']
        if opts['save_pred']:
            for task in self.tasks:
                if task == 'pose':
                    path = osp.join(out_dir, 'pose', stem + '.json')
                    record = self.task_inferencers['pose'].to_json(
                        result['input'], frame.frame_index,
                        result['img_shape'], pred['pose'])
                    write_json(path, record)
                    for fmt in opts['export_formats']:
                        fmt_path = osp.join(out_dir, f'pose_{fmt}',
                                            stem + '.json')
                        write_json(fmt_path, convert_pose_record(record, fmt))
                        result['pred_files'][f'pose_{fmt}'] = fmt_path
                else:
                    path = osp.join(out_dir, task, stem + '.npy')
                    write_npy(path, pred[task])
                    if task == 'pointmap':  # + the coloured point cloud
                        ply = osp.join(out_dir, task, stem + '.ply')
                        write_ply(ply, pred[task],
                                  colors=frame.image[..., ::-1])
                        result['pred_files']['pointmap_ply'] = ply
                        if 'pointmap_scale' in pred:
                            scale = osp.join(out_dir, task,
                                             stem + '_scale.json')
                            write_json(scale, pred['pointmap_scale'])
                            result['pred_files']['pointmap_scale'] = scale
                    elif task == 'matting':  # alpha PNG, RGBA cut-out
                        result['pred_files'].update(write_matting_files(
                            osp.join(out_dir, task, stem), pred[task],
                            opts['alpha_bits']))
                result['pred_files'][task] = path
        if opts['save_mask']:
            self._foreground(frame, pred, result, stem, out_dir)
        if opts['save_vis'] or opts['return_vis'] or opts['show']:
            vis = self.visualize(frame, pred, opts['draw_bbox'],
                                 opts['skeleton_style'],
                                 opts['background'])
            if opts['save_vis']:
                for task, img in vis.items():
                    if video:
                        path = osp.join(out_dir, task, src.name + '.mp4')
                        videos.write(id(src), task, path, img, src.fps)
                    else:
                        path = osp.join(out_dir, task, stem + '.png')
                        write_png(path, img)
                    result['vis_files'][task] = path
            if opts['return_vis']:
                result['visualization'] = vis
            if opts['show']:
                show_images(vis, max(1, int(opts['wait_time'])))
        if opts['return_datasamples']:
            result['datasamples'] = pred['samples']
        return result

    @staticmethod
    def _foreground(frame: Frame, pred: dict, result: dict, stem: str,
                    out_dir: Optional[str]) -> None:
        """The soft person mask (into the result) and its files."""
        logits = pred['samples']['seg'].seg_logits.data.float().cpu().numpy()
        alpha = soft_foreground(logits)
        result['predictions']['foreground'] = alpha
        if out_dir is None:
            return
        base = osp.join(out_dir, 'mask', stem)
        files = {'mask': base + '.png', 'mask_rgba': base + '_rgba.png'}
        write_png(files['mask'], np.round(alpha * 255).astype(np.uint8))
        write_png(files['mask_rgba'], rgba_cutout(frame.image, alpha))
        boxes = pred['pose']['bboxes'] if 'pose' in pred else []
        for i, (cut, _) in enumerate(person_cutouts(frame.image, alpha,
                                                    boxes)):
            files[f'mask_person{i}'] = f'{base}_person{i}.png'
            write_png(files[f'mask_person{i}'], cut)
        result['pred_files'].update(files)
