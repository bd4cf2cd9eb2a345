"""The batch steps of :class:`~.sapiens_inferencer.SapiensInferencer`:
pre-processing (decoding, person boxes, test pipelines; model-free) and the
forward pass (the models, the person mask, the frame-to-frame state of
videos: tracking, smoothing, keypoint boxes between detections,
stabilisers)."""
from typing import Dict, List, Optional

import numpy as np
import torch

from sapiens_mm.tasks import DENSE_TASKS, MAP_TASKS
from sapiens_mm.tracking import (
    DepthStabilizer,
    NormalStabilizer,
    PointmapScaleStabilizer,
    PoseTracker,
    bboxes_from_keypoints,
)
from sapiens_mm.utils.matting import AlphaStabilizer, unpremultiply

from .utils.sources import Frame, Source

__all__ = ['VideoState', 'BatchStepsMixin', 'nonfinite_counts']


def nonfinite_counts(pred: dict) -> Dict[str, int]:
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


class VideoState:
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


class BatchStepsMixin:
    """:meth:`preprocess` and :meth:`forward` of the multi-task inferencer,
    with the video state they carry from frame to frame. Mixed into
    :class:`~.sapiens_inferencer.SapiensInferencer`, whose attributes they
    use (``task_inferencers``, the tracking settings, ``_video``)."""

    def _new_tracker(self) -> PoseTracker:
        meta = self.task_inferencers['pose'].dataset_meta
        sigmas = meta.get('sigmas')
        return PoseTracker(
            sigmas=None if sigmas is None or not len(sigmas) else sigmas,
            kpt_thr=self.kpt_thr, **self.tracker_cfg)

    def _video_state(self, src: Source) -> Optional[VideoState]:
        """The frame-to-frame state of a video / webcam source (a new one
        when the source changes); None for images."""
        if src.kind not in ('video', 'webcam'):
            return None
        if self._video is None or self._video.source is not src:
            tracker = self._new_tracker() if (
                self.track and 'pose' in self.task_inferencers) else None
            self._video = VideoState(src, tracker, self.stabilize_alpha,
                                      self.stabilize_matting,
                                      self.stabilize_pointmap_scale)
        return self._video

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
            pred['nonfinite'] = nonfinite_counts(pred)
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
