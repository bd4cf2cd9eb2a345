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
from concurrent.futures import ThreadPoolExecutor
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
import torch
from mmengine.config import Config
from mmengine.logging import print_log
from tqdm import tqdm

from sapiens_mm.detection import PersonDetector, boxes_per_input
from sapiens_mm.tasks import TASKS, Task
from sapiens_mm.tracking import (
    DepthStabilizer,
)
from sapiens_mm.utils.upstream_warnings import quiet_upstream_warnings
from sapiens_mm.visualization import SkeletonStyle
from sapiens_mm.zoo import SapiensModelInfo

from ..inference import check_batch_size, resolve_device_and_dtype
from .base_task_inferencer import BaseTaskInferencer
from .batch_steps import BatchStepsMixin, VideoState
from .dense_inferencer import DenseInferencer, matting_background
from .frame_outputs import FrameOutputsMixin
from .model_spec import ModelSpec, resolve_models
from .pose_inferencer import PoseInferencer, detector_arguments
from .utils.display import StopRequested, display_problem
from .utils.prefetch import in_background
from .utils.sources import (
    Frame,
    InputsType,
    Source,
    collect_sources,
    count_frames,
    iter_frames,
)
from .utils.writers import VideoWriters

__all__ = ['SapiensInferencer', 'RunInterrupted']


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C stopped :meth:`SapiensInferencer.stream`: what was written
    stays (each video closed at its last frame written, so it plays).

    Attributes:
        results: The results whose files were written but which were not
            yielded yet (each like the yielded ones).
        total: The number of images and frames the call was to process
            (None for a webcam without ``max_frames``).
    """

    def __init__(self, results: List[dict], total: Optional[int]) -> None:
        super().__init__()
        self.results = results
        self.total = total

class SapiensInferencer(BatchStepsMixin, FrameOutputsMixin):
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
            given: ``'auto'`` (the default: the official RTMDet-m person
            detector, downloaded once, where mmdet runs and its weights
            are cached or downloadable, else the OpenCV HOG detector; one
            log line says which), ``'rtmdet-m'`` (RTMDet-m or an error),
            ``'hog'`` (OpenCV HOG pedestrian detector), ``'haar'`` (OpenCV
            full-body cascade), ``'none'`` or a
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
    them; :attr:`notices` keeps what the last call said. Each picture has a
    caption naming its model and, for pose, where the person boxes came
    from.

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
                 detector: Union[str, PersonDetector, None] = 'auto',
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
        with quiet_upstream_warnings():  # mmseg's notes on model builds
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
        self._video: Optional[VideoState] = None
        #: What the last call said once, in the log (a fallback, a
        #: threshold that drew nothing): ``{key: message}``, e.g. for a user
        #: interface to show.
        self.notices: Dict[str, str] = {}

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

        Raises:
            RunInterrupted: Ctrl-C (a ``KeyboardInterrupt``): the files
                written stay, each video closed at its last frame written;
                the exception holds the results written but not yielded.
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
        self.notices = {}
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
        # the write futures whose results are not all handed out yet, each
        # with the number handed out
        queue: List[list] = []
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
                queue.append([writer_pool.submit(self._postprocess_batch,
                                                 batch, preds, videos,
                                                 opts), 0])
                while len(queue) > 1:
                    yield from self._hand_out(queue, bar)
            while queue:
                yield from self._hand_out(queue, bar)
            failed = False
        except StopRequested:
            failed = False
            return
        except GeneratorExit:  # the caller stopped iterating: keep videos
            failed = False
            raise
        except KeyboardInterrupt:
            # Ctrl-C: what was written stays, each video up to its last
            # frame written (closed, so playable); the results written but
            # not handed out yet go with the exception
            failed = False
            if writer_pool is not None:
                writer_pool.shutdown(wait=True, cancel_futures=True)
            written = [
                result for future, handed in queue
                if future.done() and not future.cancelled()
                and future.exception() is None
                for result in future.result()[handed:]
            ]
            raise RunInterrupted(written, total) from None
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
    def _hand_out(queue: List[list], bar: tqdm) -> Iterable[dict]:
        """Yield the results of the first write future of ``queue`` not yet
        handed out (waiting for it), then drop it from ``queue``."""
        entry = queue[0]
        results = entry[0].result()
        while entry[1] < len(results):
            entry[1] += 1
            bar.update(1)
            yield results[entry[1] - 1]
        queue.pop(0)

    # ------------------------------------------------------------ steps