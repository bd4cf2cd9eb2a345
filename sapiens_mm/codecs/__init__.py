"""Keypoint codecs: batched decoding of mmpose's UDP heatmaps."""
from .batch_udp_heatmap import BatchUDPHeatmap, as_batch_decoder, batch_decode
from .heatmap_decoding import decode_udp_heatmaps

__all__ = [
    'BatchUDPHeatmap', 'as_batch_decoder', 'batch_decode',
    'decode_udp_heatmaps'
]
