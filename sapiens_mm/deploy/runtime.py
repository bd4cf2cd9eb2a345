"""Run exported Sapiens models (``.onnx`` with onnxruntime, ``.pt2`` with
``torch.export``) and turn their raw outputs into the data samples eager
mmpose / mmseg produce, so that the inferencer treats both alike."""
import os.path as osp
from typing import List, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from mmengine.structures import InstanceData, PixelData

from .metadata import read_metadata
from .safe_load import check_pt2_archive
from .trust import open_trusted_pt2

__all__ = [
    'ExportedModel', 'EXPORTED_SUFFIXES', 'is_exported_model',
    'postprocess_pose', 'postprocess_dense'
]

EXPORTED_SUFFIXES = ('.onnx', '.pt2')


def is_exported_model(path) -> bool:
    """Whether ``path`` names an exported model (``.onnx`` / ``.pt2``)."""
    return str(path).lower().endswith(EXPORTED_SUFFIXES)


class ExportedModel:
    """An exported model and its metadata.

    Args:
        path: ``.onnx`` (run with onnxruntime) or ``.pt2`` (run with
            ``torch.export.load``).
        device: ``'cpu'``, ``'cuda'`` or ``'cuda:N'``. ONNX on CUDA needs
            onnxruntime-gpu. Defaults to ``'cpu'``.

    Raises:
        FileNotFoundError: No such file.
        ValueError: Not an exported Sapiens model.
        UntrustedModelError: A ``.pt2`` archive this installation did not
            export and the user did not vouch for (see
            :mod:`sapiens_mm.deploy.trust`); refused before torch reads it.
        UnsafeModelError: A trusted ``.pt2`` archive whose graph or
            weights could still run code (see
            :func:`~sapiens_mm.deploy.safe_load.check_pt2_archive`).
    """

    def __init__(self, path: str, device: str = 'cpu') -> None:
        self.path = str(path)
        self.meta = read_metadata(self.path)
        self.task: str = self.meta['task']
        self.input_size = tuple(int(v) for v in self.meta['input_size'])
        self.device = torch.device(device)
        if self.path.endswith('.onnx'):
            import onnxruntime as ort
            providers = ['CPUExecutionProvider']
            if self.device.type == 'cuda':
                if 'CUDAExecutionProvider' not in \
                        ort.get_available_providers():
                    raise RuntimeError(
                        'onnxruntime has no CUDA provider here: install '
                        'onnxruntime-gpu or use device="cpu".')
                providers = [('CUDAExecutionProvider',
                              dict(device_id=self.device.index or 0))]
            self.session = ort.InferenceSession(self.path, providers=providers)
            self.module = None
        else:
            self.session = None
            # torch reads the very file object that was hashed and checked
            with open_trusted_pt2(self.path) as f:
                check_pt2_archive(self.path, f)
                f.seek(0)
                program = torch.export.load(f)
            self.module = program.module().to(self.device)

    def __call__(self, images: np.ndarray) -> np.ndarray:
        """Raw output for a batch.

        Args:
            images: (N, 3, H, W) float32 BGR 0-255 at :attr:`input_size`.

        Returns:
            The graph output as float32 numpy.

        Raises:
            ValueError: Wrong shape.
        """
        images = np.ascontiguousarray(images, dtype=np.float32)
        h, w = self.input_size
        if images.ndim != 4 or images.shape[1:] != (3, h, w):
            raise ValueError(
                f'{osp.basename(self.path)} takes (N, 3, {h}, {w}) images, '
                f'got {images.shape}; resize / crop to the exported input '
                'size (see its metadata).')
        if self.session is not None:
            return self.session.run(None, {self.meta['input_name']: images})[0]
        with torch.no_grad():
            out = self.module(torch.from_numpy(images).to(self.device))
        return out.float().cpu().numpy()


def postprocess_pose(
        heatmaps: np.ndarray,
        data_samples: Sequence,
        codec,
        output_keypoint_indices: Optional[Sequence[int]] = None) -> list:
    """Decode heatmaps into keypoints in image pixels, as
    ``TopdownPoseEstimator.predict`` does.

    Args:
        heatmaps: (N, K, h, w) flip-averaged heatmaps.
        data_samples: The test pipeline's ``PoseDataSample`` of each crop
            (``input_center``, ``input_scale``, ``input_size``, boxes).
        codec: The built keypoint codec of the config's head; a
            ``UDPHeatmap`` decodes the whole batch at once
            (:func:`sapiens_mm.codecs.batch_decode`, mmpose's results).
        output_keypoint_indices: Keep only these keypoints (test_cfg).

    Returns:
        The samples with ``pred_instances`` set.
    """
    from sapiens_mm.codecs import batch_decode
    decoded = zip(*batch_decode(codec, np.asarray(heatmaps, np.float32)))
    for (keypoints, scores), sample in zip(decoded, data_samples):
        meta = sample.metainfo
        keypoints[..., :2] = keypoints[..., :2] / meta['input_size'] * \
            meta['input_scale'] + meta['input_center'] - \
            0.5 * meta['input_scale']
        pred = InstanceData(keypoints=keypoints, keypoint_scores=scores)
        pred.keypoints_visible = scores
        if output_keypoint_indices is not None:
            for key, value in pred.all_items():
                if key.startswith('keypoint'):
                    pred.set_field(value[:, output_keypoint_indices], key)
        pred.bboxes = sample.gt_instances.bboxes
        pred.bbox_scores = sample.gt_instances.bbox_scores
        sample.pred_instances = pred
    return list(data_samples)


def postprocess_dense(task: str,
                      output: np.ndarray,
                      input_size: Sequence[int],
                      data_samples: Sequence,
                      align_corners: bool = False) -> list:
    """Resize raw dense outputs as mmseg / ``SapiensDenseEstimator`` do:
    bilinearly to the input size, then to each image's original size;
    argmax for seg, unit vectors for normals.

    Args:
        task: ``'seg'``, ``'depth'`` or ``'normal'``.
        output: (N, C, h, w) graph output.
        input_size: (H, W) of the graph input.
        data_samples: The test pipeline's samples (``ori_shape``).
        align_corners: Of the bilinear resizes.

    Returns:
        The samples with ``pred_sem_seg`` and ``seg_logits`` (seg),
        ``pred_depth_map`` (1, H, W) or ``pred_normal_map`` (3, H, W) set.
    """
    out = torch.from_numpy(np.asarray(output, np.float32))
    out = F.interpolate(out,
                        size=tuple(int(v) for v in input_size),
                        mode='bilinear',
                        align_corners=align_corners)
    results: List = []
    for i, sample in enumerate(data_samples):
        pred = F.interpolate(out[i:i + 1],
                             size=tuple(sample.metainfo['ori_shape'][:2]),
                             mode='bilinear',
                             align_corners=align_corners)[0]
        if task == 'seg':
            sample.set_data({
                'seg_logits':
                PixelData(data=pred),
                'pred_sem_seg':
                PixelData(data=pred.argmax(dim=0, keepdim=True))
            })
        elif task == 'depth':
            sample.set_data({'pred_depth_map': PixelData(data=pred)})
        else:
            sample.set_data({
                'pred_normal_map':
                PixelData(data=F.normalize(pred, dim=0, eps=1e-12))
            })
        results.append(sample)
    return results
