"""Top-down crop with the interpolation of the Sapiens2 pose inference."""
from typing import Optional

import cv2
import numpy as np
from mmpose.datasets.transforms import TopdownAffine
from mmpose.registry import TRANSFORMS
from mmpose.structures.bbox import get_udp_warp_matrix, get_warp_matrix

__all__ = ['Sapiens2TopdownAffine']


@TRANSFORMS.register_module()
class Sapiens2TopdownAffine(TopdownAffine):
    """mmpose ``TopdownAffine`` that warps with ``INTER_AREA`` when the crop
    shrinks the person and ``INTER_CUBIC`` otherwise.

    The official Sapiens2 pose inference picks the interpolation from the
    scale factors ``sx = w / bbox_w`` and ``sy = h / bbox_h`` of the crop:
    ``cv2.INTER_AREA`` if ``min(sx, sy) < 1``, else ``cv2.INTER_CUBIC``
    (upstream always uses ``INTER_LINEAR``). Box aspect fixing, keypoint
    transformation and the added keys are upstream's.

    Args:
        input_size: Crop (w, h). Sapiens2: (768, 1024).
        use_udp: Unbiased data processing warp. Defaults to True (UDP
            codec).
    """

    def __init__(self, input_size, use_udp: bool = True) -> None:
        super().__init__(input_size=input_size, use_udp=use_udp)

    def transform(self, results: dict) -> Optional[dict]:
        """Crop ``img`` (one instance) and transform the keypoints."""
        img = results['img']
        if isinstance(img, list):
            raise TypeError('Sapiens2TopdownAffine crops one image; got a '
                            'list of images.')
        # Upstream computes the box, the keypoints and the metadata; the
        # image is warped below with the chosen interpolation.
        results['img'] = np.zeros((1, 1) + img.shape[2:], img.dtype)
        results = super().transform(results)
        w, h = self.input_size
        center = results['input_center']
        scale = results['input_scale']
        rot = (results['bbox_rotation'][0]
               if 'bbox_rotation' in results else 0.0)
        matrix = (get_udp_warp_matrix if self.use_udp else get_warp_matrix)(
            center, scale, rot, output_size=(w, h))
        shrink = min(w / scale[0], h / scale[1]) < 1
        results['img'] = cv2.warpAffine(
            img, matrix, (int(w), int(h)),
            flags=cv2.INTER_AREA if shrink else cv2.INTER_CUBIC)
        return results
