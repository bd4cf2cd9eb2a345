"""mmpose's ``UDPHeatmap`` with batched decoding on the heatmaps' device."""
from typing import List, Tuple, Union

import numpy as np
import torch
from mmpose.codecs import UDPHeatmap
from mmpose.codecs.base import BaseKeypointCodec
from mmpose.registry import KEYPOINT_CODECS

from .heatmap_decoding import decode_udp_heatmaps

__all__ = ['BatchUDPHeatmap', 'as_batch_decoder', 'batch_decode']


@KEYPOINT_CODECS.register_module()
class BatchUDPHeatmap(UDPHeatmap):
    """:class:`mmpose.codecs.UDPHeatmap` that decodes a whole batch at once.

    Encoding, arguments and results are upstream's. mmpose heads call
    :meth:`batch_decode` (instead of :meth:`decode` per person on the CPU)
    because it is overridden; for ``heatmap_type='gaussian'`` it runs
    :func:`~sapiens_mm.codecs.heatmap_decoding.decode_udp_heatmaps` with
    torch on the heatmaps' GPU, or with numpy + OpenCV for CPU tensors, and
    gives upstream's results.
    ``'combined'`` heatmaps are decoded by upstream, one person at a time.

    Use it in a config as ``codec = dict(type='BatchUDPHeatmap', ...)`` or
    convert a built codec with :func:`as_batch_decoder`.
    """

    def batch_decode(
        self, batch_heatmaps: Union[torch.Tensor, np.ndarray]
    ) -> Tuple[List[np.ndarray], List[np.ndarray]]:
        """Decode the heatmaps of a batch of people.

        Args:
            batch_heatmaps: (N, K, H, W) heatmaps (a tensor on any device,
                or a numpy array), H x W the codec's ``heatmap_size``.

        Returns:
            tuple: N keypoint arrays (1, K, 2) in input pixels and N score
            arrays (1, K), float32 numpy, as upstream's :meth:`decode` gives
            for each person.

        Raises:
            ValueError: The heatmaps are not (N, K, H, W) at the codec's
                ``heatmap_size``.
        """
        w, h = self.heatmap_size
        if batch_heatmaps.ndim != 4 or tuple(
                batch_heatmaps.shape[-2:]) != (h, w):
            raise ValueError(
                f'{type(self).__name__} decodes (N, K, {h}, {w}) heatmaps '
                f'(its heatmap_size is (W, H) = {tuple(self.heatmap_size)}), '
                f'got shape {tuple(batch_heatmaps.shape)}.')
        if self.heatmap_type != 'gaussian':
            return _decode_each(self, batch_heatmaps)
        if isinstance(batch_heatmaps, torch.Tensor) and \
                batch_heatmaps.device.type == 'cpu':
            # numpy + OpenCV: its blur rounds exactly as mmpose's does.
            batch_heatmaps = batch_heatmaps.detach().float().numpy()
        keypoints, scores = decode_udp_heatmaps(batch_heatmaps,
                                                self.input_size,
                                                self.blur_kernel_size)
        if isinstance(keypoints, torch.Tensor):
            keypoints = keypoints.cpu().numpy()
            scores = scores.cpu().numpy()
        return list(keypoints[:, None]), list(scores[:, None])


def as_batch_decoder(codec: BaseKeypointCodec) -> BaseKeypointCodec:
    """The batched equivalent of a built codec: a
    :class:`~mmpose.codecs.UDPHeatmap` becomes a :class:`BatchUDPHeatmap`
    with the same settings; other codecs are returned unchanged."""
    if type(codec) is not UDPHeatmap:
        return codec
    return BatchUDPHeatmap(input_size=codec.input_size,
                           heatmap_size=codec.heatmap_size,
                           heatmap_type=codec.heatmap_type,
                           sigma=codec.sigma,
                           radius_factor=codec.radius_factor,
                           blur_kernel_size=codec.blur_kernel_size)


def batch_decode(codec: BaseKeypointCodec,
                 heatmaps: Union[torch.Tensor, np.ndarray]
                 ) -> Tuple[List[np.ndarray], List[np.ndarray]]:
    """Decode a batch with any codec: batched where the codec (or its
    :func:`as_batch_decoder` equivalent) supports it, else one person at a
    time with ``codec.decode``.

    Args:
        codec: A built mmpose keypoint codec.
        heatmaps: (N, ...) network outputs of N people.

    Returns:
        tuple: N keypoint arrays (1, K, D) and N score arrays (1, K).
    """
    codec = as_batch_decoder(codec)
    if codec.support_batch_decoding:
        return codec.batch_decode(heatmaps)
    return _decode_each(codec, heatmaps)


def _decode_each(codec: BaseKeypointCodec, heatmaps) -> tuple:
    """Upstream ``codec.decode`` person by person, on float32 numpy."""
    if isinstance(heatmaps, torch.Tensor):
        heatmaps = heatmaps.detach().float().cpu().numpy()
    decoded = [codec.decode(np.asarray(hm, np.float32)) for hm in heatmaps]
    return [d[0] for d in decoded], [d[1] for d in decoded]
