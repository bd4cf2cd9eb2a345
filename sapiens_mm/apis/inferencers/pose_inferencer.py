"""Top-down pose estimation: person boxes, crops, heatmaps, keypoints."""
from pathlib import Path
from typing import List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope
from mmpose.datasets.transforms import TopdownAffine

from sapiens_mm.codecs import as_batch_decoder
from sapiens_mm.visualization import SkeletonStyle, draw_openpose, draw_pose

from ..inference import skeleton_name
from ..model_zoo import SapiensModelInfo
from .base_task_inferencer import BaseTaskInferencer
from .utils.person_detector import (PersonDetector, build_person_detector,
                                    select_person_boxes)

__all__ = ['PoseInferencer']


class PoseInferencer(BaseTaskInferencer):
    """Sapiens pose on images: boxes (given, detected or the whole image),
    one crop per person, keypoints in image pixels.

    Args:
        cfg: A ``TopdownPoseEstimator`` config.
        checkpoint: See :class:`BaseTaskInferencer`.
        device: Torch device.
        dtype: Autocast precision.
        info: Model zoo facts of the checkpoint.
        detector: ``'hog'``, ``'haar'``, ``'none'`` or a
            :class:`~.utils.person_detector.PersonDetector`; see
            :func:`~.utils.person_detector.build_person_detector`.
        det_config: mmdet detector config (takes priority over
            ``detector``).
        det_checkpoint: Its checkpoint.
        det_cat_id: Person class index of the mmdet detector.
        bbox_thr: Minimum detector score of a person box.
        nms_thr: IoU threshold of the box NMS.
        kpt_thr: Keypoints below this score are not drawn.
    """

    def __init__(self,
                 cfg: Config,
                 checkpoint: Union[str, Path, Mapping, None] = None,
                 device: Union[str, torch.device] = 'cpu',
                 dtype: torch.dtype = torch.float32,
                 info: Optional[SapiensModelInfo] = None,
                 detector: Union[str, PersonDetector, None] = 'hog',
                 det_config=None,
                 det_checkpoint: Optional[str] = None,
                 det_cat_id: int = 0,
                 bbox_thr: float = 0.3,
                 nms_thr: float = 0.3,
                 kpt_thr: float = 0.3) -> None:
        super().__init__(cfg, checkpoint, device, dtype, info)
        if not self.exported:  # decode all crops at once, on the device
            self.model.head.decoder = as_batch_decoder(self.model.head.decoder)
        if self.exported:
            from mmpose.registry import KEYPOINT_CODECS
            with DefaultScope.overwrite_default_scope('mmpose'):
                self.codec = KEYPOINT_CODECS.build(self.cfg.model.head.decoder)
        self.detector = build_person_detector(detector, det_config,
                                              det_checkpoint, str(device),
                                              det_cat_id)
        self.bbox_thr, self.nms_thr, self.kpt_thr = bbox_thr, nms_thr, kpt_thr

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
        from sapiens_mm.deploy import postprocess_pose
        return postprocess_pose(
            output, data_samples, self.codec,
            self.cfg.model.get('test_cfg', {}).get('output_keypoint_indices'))

    # ------------------------------------------------------------- steps
    def preprocess_images(
            self, images: Sequence[np.ndarray], names: Sequence[str],
            user_boxes: Sequence[Optional[np.ndarray]]) -> dict:
        """Person boxes and crops of a batch of images (model-free).

        Args:
            images: (H, W, 3) uint8 BGR images.
            names: Their names (``img_path`` of the data samples).
            user_boxes: Per image, boxes given by the user or None (see
                :func:`~.utils.person_detector.select_person_boxes`).

        Returns:
            ``dict(people=[per image: bboxes, bbox_scores, bbox_source,
            skeleton], packed=[pipeline output per person], owners=[image
            index per person])``.
        """
        people, infos, owners = [], [], []
        for i, (img, name, boxes) in enumerate(zip(images, names,
                                                  user_boxes)):
            boxes, scores, source = select_person_boxes(
                img, self.detector, boxes, self.bbox_thr, self.nms_thr)
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
        return dict(people=people, packed=self.preprocess(infos),
                    owners=owners)

    def postprocess(self, prepared: dict, samples: list) -> List[dict]:
        """Per image: its people (from :meth:`preprocess_images`) with
        ``keypoints`` (N, K, 2) in image pixels, ``keypoint_scores`` (N, K)
        and ``samples`` (the N data samples)."""
        k = self.num_keypoints
        results = []
        for i, people in enumerate(prepared['people']):
            mine = [s for s, o in zip(samples, prepared['owners']) if o == i]
            pose = dict(people)
            pose['keypoints'] = np.stack([
                np.asarray(s.pred_instances.keypoints[0], np.float32)
                for s in mine
            ]) if mine else np.zeros((0, k, 2), np.float32)
            pose['keypoint_scores'] = np.stack([
                np.asarray(s.pred_instances.keypoint_scores[0], np.float32)
                for s in mine
            ]) if mine else np.zeros((0, k), np.float32)
            results.append(dict(pose=pose, samples=mine))
        return results

    @property
    def keypoint_names(self) -> List[str]:
        """The model's keypoint names in order (its dataset metainfo)."""
        meta = self.dataset_meta
        if 'keypoint_id2name' not in meta:
            raise ValueError('The pose model\'s metainfo has no keypoint '
                             'names: give its dataset a registered type or '
                             'a metainfo with keypoint_info.')
        return [meta['keypoint_id2name'][i] for i in range(self.num_keypoints)]

    def visualize(self,
                  image: np.ndarray,
                  pose: dict,
                  draw_bbox: bool = True,
                  style: SkeletonStyle = 'mmpose') -> np.ndarray:
        """The skeletons of one image's people, BGR: ``'mmpose'`` over the
        image in the layout's colours (and the boxes), ``'openpose'`` the
        ControlNet-style skeleton on black (see
        :func:`sapiens_mm.visualization.draw_openpose`)."""
        if style == 'openpose':
            return draw_openpose(pose['keypoints'], pose['keypoint_scores'],
                                 self.keypoint_names, image.shape[:2],
                                 kpt_thr=self.kpt_thr)
        return draw_pose(image,
                         pose['keypoints'],
                         pose['keypoint_scores'],
                         self.dataset_meta,
                         bboxes=pose['bboxes'] if draw_bbox else None,
                         kpt_thr=self.kpt_thr,
                         track_ids=pose.get('track_ids'))

    def to_json(self, frame_name: str, frame_index: Optional[int],
                img_shape: Tuple[int, int], pose: dict) -> dict:
        """COCO-style JSON record of one image's people (boxes xywh,
        keypoints flattened as x, y, score; on video also each person's
        ``track_id``, -1 for one too unsure to be tracked)."""
        meta = self.dataset_meta
        names = [
            meta['keypoint_id2name'][i] for i in range(self.num_keypoints)
        ] if 'keypoint_id2name' in meta else None
        instances = []
        for box, bscore, kpts, kscores in zip(pose['bboxes'],
                                              pose['bbox_scores'],
                                              pose['keypoints'],
                                              pose['keypoint_scores']):
            x1, y1, x2, y2 = [float(v) for v in box]
            instances.append(
                dict(bbox=[x1, y1, x2 - x1, y2 - y1],
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
                    num_keypoints=self.num_keypoints,
                    keypoint_names=names,
                    skeleton_links=[
                        list(map(int, link))
                        for link in meta.get('skeleton_links', [])
                    ],
                    instances=instances)
