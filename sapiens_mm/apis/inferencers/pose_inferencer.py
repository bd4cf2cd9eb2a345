"""Top-down pose estimation: person boxes, crops, heatmaps, keypoints."""
import functools
import os.path as osp
import warnings
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from mmengine.registry import DefaultScope
from mmengine.structures import InstanceData
from mmpose.datasets.transforms import TopdownAffine
from mmpose.structures import PoseDataSample, merge_data_samples

from sapiens_mm.codecs import as_batch_decoder
from sapiens_mm.deploy.runtime import postprocess_pose
from sapiens_mm.detection import (
    PersonDetector,
    boxes_per_input,
    build_person_detector,
    select_person_boxes,
)
from sapiens_mm.visualization import (SkeletonStyle, add_caption, draw_openpose,
                                      draw_pose)
from sapiens_mm.zoo import SapiensModelInfo

from ..inference import skeleton_name
from .base_task_inferencer import BaseTaskInferencer, ModelType, WeightsType
from .utils.sources import Frame, Source
from .utils.writers import write_json

__all__ = ['PoseInferencer', 'detector_arguments']



def detector_arguments(det_model, det_weights, det_cat_ids, det_config,
                       det_checkpoint, det_cat_id) -> tuple:
    """``(det_model, det_weights, det_cat_ids)`` with the deprecated
    spellings ``det_config`` / ``det_checkpoint`` / ``det_cat_id`` folded in
    (each with a ``DeprecationWarning``).

    Raises:
        ValueError: A value given under both spellings.
    """
    new = dict(det_model=det_model, det_weights=det_weights,
               det_cat_ids=det_cat_ids)
    defaults = dict(det_model=None, det_weights=None, det_cat_ids=0)
    for old, name, value in (('det_config', 'det_model', det_config),
                             ('det_checkpoint', 'det_weights',
                              det_checkpoint),
                             ('det_cat_id', 'det_cat_ids', det_cat_id)):
        if value is None:
            continue
        warnings.warn(f'{old} is deprecated: use {name} (the name mmpose\'s '
                      'Pose2DInferencer uses).', DeprecationWarning,
                      stacklevel=3)
        if new[name] != defaults[name]:
            raise ValueError(f'Give {name} or {old}, not both.')
        new[name] = value
    return new['det_model'], new['det_weights'], new['det_cat_ids']

class PoseInferencer(BaseTaskInferencer):
    """Sapiens pose on images, as mmpose's ``Pose2DInferencer``: person
    boxes (given, detected or the whole image), one crop per person,
    keypoints in image pixels.

    Call: see :class:`BaseTaskInferencer`; also ``bboxes`` (one N x 4
    (x1, y1, x2, y2) or N x 5 (+ score) array for every input, or a list
    with one such array or None per input), ``bbox_thr`` and ``nms_thr``
    (this call's detector thresholds), ``draw_bbox`` and
    ``skeleton_style`` (the drawings, see :meth:`draw`). The predictions are
    one dict per image (:meth:`to_prediction`); the data samples one
    ``PoseDataSample`` per image, its people merged as mmpose's
    ``merge_data_samples`` does, with ``skeleton`` and ``bbox_source`` in its
    metainfo. ``pred_out_dir`` gets the COCO-style JSON record of each image
    (:meth:`to_json`), ``vis_out_dir`` the drawings.

    Args:
        model: The ``TopdownPoseEstimator`` config, or a checkpoint alone;
            see :class:`BaseTaskInferencer`.
        weights: Its checkpoint.
        device: Torch device.
        dtype: Autocast precision.
        info: Model zoo facts of the checkpoint.
        detector: ``'auto'`` (RTMDet-m where mmdet runs and its weights
            are cached or downloadable, else HOG), ``'rtmdet-m'``,
            ``'hog'``, ``'haar'``, ``'none'`` or a
            :class:`~sapiens_mm.detection.PersonDetector`; see
            :func:`~sapiens_mm.detection.build_person_detector`.
        det_model: mmdet detector config (takes priority over
            ``detector``); the argument names are those of mmpose's
            ``Pose2DInferencer``.
        det_weights: Its checkpoint.
        det_cat_ids: Person class index (or indices) of the mmdet
            detector.
        bbox_thr: Minimum detector score of a person box.
        nms_thr: IoU threshold of the box NMS.
        kpt_thr: Keypoints below this score are not drawn.
        show_progress: Show a progress bar over the batches of a call.
        whole_image_fallback: When the detector finds no one, use the whole
            image as the person box (``bbox_source='whole_image'``). False:
            such an image has no people (``bbox_source='none'``).
        det_config, det_checkpoint, det_cat_id: Deprecated spellings of
            ``det_model``, ``det_weights``, ``det_cat_ids``.

    Example:
        >>> from sapiens_mm.apis import PoseInferencer
        >>> pose = PoseInferencer(
        ...     'configs/pose/goliath/sapiens_0.3b-210e_goliath-1024x768.py',
        ...     'sapiens_0.3b_goliath_best_goliath_AP_573.pth',
        ...     detector='none')
        >>> out = pose('photo.jpg', bboxes=[np.array([[10, 8, 80, 110]])])
        >>> out['predictions'][0]['keypoints'].shape  # (N, K, 2) pixels
        (1, 308, 2)
    """

    supported_tasks = ('pose', )
    preprocess_kwargs: set = {'bboxes', 'bbox_thr', 'nms_thr'}
    visualize_kwargs: set = BaseTaskInferencer.visualize_kwargs | {
        'draw_bbox', 'skeleton_style'
    }

    def __init__(self,
                 model: ModelType = None,
                 weights: WeightsType = None,
                 device: Union[str, torch.device, None] = None,
                 dtype: Union[torch.dtype, str] = torch.float32,
                 info: Optional[SapiensModelInfo] = None,
                 detector: Union[str, PersonDetector, None] = 'auto',
                 det_model=None,
                 det_weights: Optional[str] = None,
                 det_cat_ids: Union[int, Sequence[int]] = 0,
                 bbox_thr: float = 0.3,
                 nms_thr: float = 0.3,
                 kpt_thr: float = 0.3,
                 show_progress: bool = True,
                 whole_image_fallback: bool = True,
                 *,
                 det_config=None,
                 det_checkpoint: Optional[str] = None,
                 det_cat_id: Optional[int] = None) -> None:
        det_model, det_weights, det_cat_ids = detector_arguments(
            det_model, det_weights, det_cat_ids, det_config, det_checkpoint,
            det_cat_id)
        super().__init__(model=model,
                         weights=weights,
                         device=device,
                         dtype=dtype,
                         info=info,
                         show_progress=show_progress)
        if not self.exported:  # decode all crops at once, on the device
            self.model.head.decoder = as_batch_decoder(self.model.head.decoder)
        if self.exported:
            from mmpose.registry import KEYPOINT_CODECS
            with DefaultScope.overwrite_default_scope('mmpose'):
                self.codec = KEYPOINT_CODECS.build(self.cfg.model.head.decoder)
        # built when an image first needs it: boxes given for every image
        # build none ('auto' looks for RTMDet-m's weights on the Hub)
        self._detector_args = (detector, det_model, det_weights,
                               str(self.device), det_cat_ids)
        self.bbox_thr, self.nms_thr, self.kpt_thr = bbox_thr, nms_thr, kpt_thr
        self.whole_image_fallback = bool(whole_image_fallback)

    @functools.cached_property
    def detector(self) -> Optional[PersonDetector]:
        """The person detector (None: none), built on first use: a run
        whose images all come with person boxes builds none, and so
        downloads nothing. Assigning one replaces it."""
        return build_person_detector(*self._detector_args)

    def _detect(self, img: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """The detector's boxes and scores of an image (none without a
        detector): what :func:`select_person_boxes` calls when the user's
        boxes do not cover the image, building the detector then."""
        detector = self.detector
        if detector is None:
            return np.zeros((0, 4), np.float32), np.zeros(0, np.float32)
        return detector(img)

    @property
    def output_layer(self) -> torch.nn.Module:
        return self.model.head.final_layer

    @property
    def num_keypoints(self) -> int:
        return int(self.dataset_meta['num_keypoints'])

    def pipeline_input_size(self) -> Optional[tuple]:
        size = [
            s.input_size for s in self.pipeline.transforms
            if isinstance(s, TopdownAffine)  # Sapiens2TopdownAffine too
        ]
        return tuple(size[0]) if size else None

    def decode_exported(self, output, data_samples: list) -> list:
        return postprocess_pose(
            output, data_samples, self.codec,
            self.cfg.model.get('test_cfg', {}).get('output_keypoint_indices'))

    # ------------------------------------------------------------- steps
    def preprocess(self,
                   inputs: List[Source],
                   batch_size: int = 1,
                   bboxes=None,
                   bbox_thr: Optional[float] = None,
                   nms_thr: Optional[float] = None):
        """Decode ``batch_size`` images at a time, find their person boxes
        and crop them (:meth:`preprocess_images`).

        Args:
            inputs: The images (:meth:`_inputs_to_list`).
            batch_size: Images per batch (all their people run in one
                forward pass).
            bboxes: Boxes given per input (see the class docstring).
            bbox_thr: Detector score threshold (None: the inferencer's).
            nms_thr: Detector NMS IoU threshold (None: the inferencer's).

        Yields:
            Per batch, :meth:`preprocess_images`'s dict plus ``data``, the
            collated crops.
        """
        user_boxes = boxes_per_input(bboxes,
                                     max(s.index for s in inputs) + 1)

        def prepare(frames: List[Frame]) -> dict:
            prepared = self.preprocess_images(
                [f.image for f in frames], [f.source.name for f in frames],
                [user_boxes[f.source.index] for f in frames], bbox_thr,
                nms_thr)
            self.name_samples(prepared['packed'], frames, prepared['owners'])
            prepared['data'] = self.collate_fn(prepared['packed'])
            return prepared

        return self.chunks(inputs, batch_size, prepare)

    def preprocess_images(self,
                          images: Sequence[np.ndarray],
                          names: Sequence[str],
                          user_boxes: Sequence[Optional[np.ndarray]],
                          bbox_thr: Optional[float] = None,
                          nms_thr: Optional[float] = None) -> dict:
        """Person boxes and crops of a batch of images (model-free).

        Args:
            images: (H, W, 3) uint8 BGR images.
            names: Their names (``img_path`` of the data samples).
            user_boxes: Per image, boxes given by the user or None (see
                :func:`~.utils.person_detector.select_person_boxes`).
            bbox_thr: Detector score threshold (None: the inferencer's).
            nms_thr: Detector NMS IoU threshold (None: the inferencer's).

        Returns:
            ``dict(people=[per image: bboxes, bbox_scores, bbox_source,
            skeleton], packed=[pipeline output per person], owners=[image
            index per person])``.
        """
        bbox_thr = self.bbox_thr if bbox_thr is None else bbox_thr
        nms_thr = self.nms_thr if nms_thr is None else nms_thr
        people, infos, owners = [], [], []
        for i, (img, name, boxes) in enumerate(zip(images, names,
                                                  user_boxes)):
            boxes, scores, source = select_person_boxes(
                img, self._detect, boxes, bbox_thr, nms_thr)
            if source == 'whole_image' and self.detector is not None and \
                    not self.whole_image_fallback:
                boxes, scores, source = boxes[:0], scores[:0], 'none'
            people.append(
                dict(skeleton=skeleton_name(self.dataset_meta),
                     bboxes=boxes,
                     bbox_scores=scores,
                     bbox_source=source))
            for box, score in zip(boxes, scores):
                info = dict(img=img,
                            img_path=name,
                            bbox=box[None].astype(np.float32),
                            bbox_score=np.array([score], np.float32))
                info.update(self.dataset_meta)
                infos.append(info)
                owners.append(i)
        return dict(people=people, packed=self.run_pipeline(infos),
                    owners=owners)

    def forward(self, inputs: dict, **kwargs) -> List[PoseDataSample]:
        """One :meth:`preprocess` batch through the model: every person
        crop at once; returns one merged data sample per image
        (:meth:`merge_people`)."""
        samples = self.run_model(inputs['data']) if inputs['packed'] else []
        return [
            self.merge_people(people, crops) for people, crops in zip(
                inputs['people'], self.crops_per_image(inputs, samples))
        ]

    @staticmethod
    def crops_per_image(prepared: dict, samples: list) -> List[list]:
        """The crop data samples of each image of a
        :meth:`preprocess_images` output, in crop order."""
        groups: List[list] = [[] for _ in prepared['people']]
        for sample, owner in zip(samples, prepared['owners']):
            groups[owner].append(sample)
        return groups

    def merge_people(self, people: dict,
                     crops: List[PoseDataSample]) -> PoseDataSample:
        """One image's crop data samples as one ``PoseDataSample`` (mmpose's
        ``merge_data_samples``: ``pred_instances`` of all its people), with
        ``skeleton`` and ``bbox_source`` (from :meth:`preprocess_images`'
        ``people``) in its metainfo."""
        if crops:
            merged = merge_data_samples(crops)
        else:
            k = self.num_keypoints
            merged = PoseDataSample(pred_instances=InstanceData(
                keypoints=np.zeros((0, k, 2), np.float32),
                keypoint_scores=np.zeros((0, k), np.float32),
                bboxes=np.zeros((0, 4), np.float32),
                bbox_scores=np.zeros(0, np.float32)))
        merged.set_metainfo(dict(skeleton=people['skeleton'],
                                 bbox_source=people['bbox_source']))
        return merged

    def to_prediction(self, sample: PoseDataSample) -> dict:
        """One image's people: ``skeleton``, ``bboxes`` (N, 4) xyxy,
        ``bbox_scores`` (N, ), ``bbox_source`` (``'user'``, ``'detector'``,
        ``'whole_image'``, or ``'none'`` when the detector found no one and
        ``whole_image_fallback`` is off), ``keypoints`` (N, K, 2) in image
        pixels and ``keypoint_scores`` (N, K), all float32 (a merged data
        sample of :meth:`merge_people`)."""
        inst = sample.pred_instances
        return dict(
            skeleton=sample.metainfo['skeleton'],
            bboxes=np.asarray(inst.bboxes, np.float32).reshape(-1, 4),
            bbox_scores=np.asarray(inst.bbox_scores, np.float32).reshape(-1),
            bbox_source=sample.metainfo['bbox_source'],
            keypoints=np.asarray(inst.keypoints, np.float32),
            keypoint_scores=np.asarray(inst.keypoint_scores, np.float32))

    def keypoints_of(self, prepared: dict, samples: list) -> List[dict]:
        """Per image of a :meth:`preprocess_images` output:
        ``dict(pose=`` :meth:`to_prediction` ``, samples=[its N crop data
        samples])`` from the crop data samples of :meth:`forward_batches`.
        """
        return [
            dict(pose=self.to_prediction(self.merge_people(people, crops)),
                 samples=crops) for people, crops in zip(
                     prepared['people'], self.crops_per_image(
                         prepared, samples))
        ]

    def write_prediction(self, sample: PoseDataSample, prediction: dict,
                         pred_out_dir: str) -> None:
        """``<pred_out_dir>/<output_name>.json``: the :meth:`to_json`
        record of the image."""
        write_json(
            osp.join(pred_out_dir, sample.metainfo['output_name'] + '.json'),
            self.to_json(sample.metainfo['img_path'], None,
                         sample.metainfo['ori_shape'], prediction))

    @property
    def keypoint_names(self) -> List[str]:
        """The model's keypoint names in order (its dataset metainfo)."""
        meta = self.dataset_meta
        if 'keypoint_id2name' not in meta:
            raise ValueError('The pose model\'s metainfo has no keypoint '
                             'names: give its dataset a registered type or '
                             'a metainfo with keypoint_info.')
        return [meta['keypoint_id2name'][i] for i in range(self.num_keypoints)]

    def boxes_caption(self, pose: dict) -> str:
        """Where one image's person boxes came from, for its picture: the
        detector (and why it stands in for RTMDet-m, when it does), the
        whole image when it found no one, the user's boxes, or the previous
        video frame's keypoints."""
        source = pose.get('bbox_source')
        if source == 'user':  # no detector asked for: none is built
            return 'boxes: given'
        detector = self.detector
        name = 'no detector' if detector is None else detector.label
        if detector is not None and detector.fallback:
            name += f' ({detector.fallback})'
        return {
            'detector': f'boxes: {name}',
            'keypoints': f"boxes: the previous frame's people ({name})",
            'whole_image': ('boxes: whole image (no detector)'
                            if detector is None else
                            f'boxes: whole image, {name} found no one'),
            'none': f'{name} found no one: no pose',
        }.get(source, f'boxes: {source}')

    def draw(self,
             image: np.ndarray,
             pose: dict,
             draw_bbox: bool = True,
             skeleton_style: SkeletonStyle = 'mmpose') -> np.ndarray:
        """The skeletons of one image's people, BGR: ``'mmpose'`` over the
        image in the layout's colours (and the boxes), with a caption below
        naming the model and where the person boxes came from;
        ``'openpose'`` the ControlNet-style skeleton on black, without
        caption (it is a conditioning image; see
        :func:`sapiens_mm.visualization.draw_openpose`)."""
        if skeleton_style == 'openpose':
            return draw_openpose(pose['keypoints'], pose['keypoint_scores'],
                                 self.keypoint_names, image.shape[:2],
                                 kpt_thr=self.kpt_thr)
        picture = draw_pose(image,
                            pose['keypoints'],
                            pose['keypoint_scores'],
                            self.dataset_meta,
                            bboxes=pose['bboxes'] if draw_bbox else None,
                            kpt_thr=self.kpt_thr,
                            track_ids=pose.get('track_ids'))
        return add_caption(picture, self.caption() + [self.boxes_caption(pose)])

    def to_json(self, frame_name: str, frame_index: Optional[int],
                img_shape: Tuple[int, int], pose: dict) -> dict:
        """JSON record of one image's people, COCO-like: boxes as given to
        and returned by the inferencer, ``[x1, y1, x2, y2]`` in pixels (the
        record says so: ``bbox_format: 'xyxy'``), keypoints flattened as
        x, y, score; on video also each person's ``track_id``, -1 for one
        too unsure to be tracked."""
        meta = self.dataset_meta
        names = [
            meta['keypoint_id2name'][i] for i in range(self.num_keypoints)
        ] if 'keypoint_id2name' in meta else None
        instances = []
        for box, bscore, kpts, kscores in zip(pose['bboxes'],
                                              pose['bbox_scores'],
                                              pose['keypoints'],
                                              pose['keypoint_scores']):
            instances.append(
                dict(bbox=[float(v) for v in box],
                     bbox_score=float(bscore),
                     bbox_source=pose['bbox_source'],
                     skeleton=pose['skeleton'],
                     score=float(np.mean(kscores)) if len(kscores) else 0.0,
                     keypoints=np.concatenate(
                         [kpts, kscores[:, None]], axis=1).reshape(-1).tolist(),
                     keypoint_scores=kscores.tolist()))
        for inst, track_id in zip(instances, pose.get('track_ids', ())):
            inst['track_id'] = int(track_id)
        return dict(input=frame_name,
                    frame_index=frame_index,
                    height=int(img_shape[0]),
                    width=int(img_shape[1]),
                    skeleton=pose['skeleton'],
                    bbox_format='xyxy',
                    num_keypoints=self.num_keypoints,
                    keypoint_names=names,
                    skeleton_links=[
                        list(map(int, link))
                        for link in meta.get('skeleton_links', [])
                    ],
                    instances=instances)
