"""Heatmap-to-keypoint decoding speed: mmpose's ``UDPHeatmap.decode``
against :func:`sapiens_mm.codecs.decode_udp_heatmaps`."""
import statistics
from typing import List, Sequence, Tuple

import torch

from .timing import time_callable

__all__ = ['benchmark_decode', 'peaked_heatmaps']


def peaked_heatmaps(n: int, k: int, h: int, w: int, sigma: float,
                     seed: int = 0):
    """(n, k, h, w) float32 heatmaps like a trained model's: one Gaussian
    peak of random height and place per map, a small negative bias and
    noise."""
    import numpy as np
    rng = np.random.default_rng(seed)
    out = np.empty((n, k, h, w), np.float32)
    for i in range(n):
        cx = rng.uniform(0, w - 1, (k, 1))
        cy = rng.uniform(0, h - 1, (k, 1))
        gx = np.exp(-(np.arange(w) - cx)**2 / (2 * sigma**2))
        gy = np.exp(-(np.arange(h) - cy)**2 / (2 * sigma**2))
        amp = rng.uniform(0.1, 1.0, (k, 1, 1))
        out[i] = amp * gy[:, :, None] * gx[:, None, :]
        out[i] += rng.normal(-0.01, 0.01, (k, h, w)).astype(np.float32)
    return out


def benchmark_decode(num_keypoints: Sequence[int] = (17, 133, 308),
                     heatmap_sizes: Sequence[Tuple[int, int]] = ((64, 48),
                                                                 (256, 192)),
                     people: int = 4,
                     devices: Sequence[str] = ('cpu', ),
                     warmup: int = 1,
                     repeats: int = 3) -> List[dict]:
    """Time heatmap-to-keypoint decoding: mmpose's ``UDPHeatmap.decode``
    (one person at a time) against
    :func:`sapiens_mm.codecs.decode_udp_heatmaps` (numpy, and torch on each
    of ``devices``), in the same run on the same heatmaps.

    Args:
        num_keypoints: Keypoint counts K to time.
        heatmap_sizes: (H, W) heatmap sizes; a model's input is 4x that
            (64x48 heatmaps for 256x192 crops, 256x192 for 1024x768).
        people: People decoded per call.
        devices: Devices of the torch path, e.g. ``('cpu', 'cuda')``.
        warmup: Untimed calls of each decoder.
        repeats: Timed calls (the median is reported).

    Returns:
        One dict per (size, K): ``heatmap_size``, ``num_keypoints``,
        ``people``, ``ms_per_person`` ({decoder: median wall ms}),
        ``min_ms_per_person`` (the fastest run: the least disturbed by other
        jobs), ``speedup`` / ``min_speedup`` (mmpose's median / min wall time
        over the fastest other decoder's) and ``max_abs_diff_px``
        ({decoder: largest keypoint difference from mmpose, input pixels}).
        Wall time only: the process CPU time counts the spin-waiting of
        torch's idle intra-op threads (about twice the wall time on two
        threads for every decoder), so it measures no decoder.
    """
    import numpy as np
    from mmpose.codecs import UDPHeatmap

    from sapiens_mm.codecs import decode_udp_heatmaps
    rows = []
    for h, w in heatmap_sizes:
        codec = UDPHeatmap(input_size=(4 * w, 4 * h), heatmap_size=(w, h),
                           sigma=2 if h <= 64 else 6)
        for k in num_keypoints:
            heatmaps = peaked_heatmaps(people, k, h, w, codec.sigma)
            ref = np.concatenate([codec.decode(hm)[0] for hm in heatmaps])
            runs = {
                'mmpose': (lambda: [codec.decode(hm) for hm in heatmaps],
                           torch.device('cpu')),
                'numpy': (lambda: decode_udp_heatmaps(heatmaps,
                                                      codec.input_size),
                          torch.device('cpu')),
            }
            for dev in devices:
                dev = torch.device(dev)
                tensor = torch.from_numpy(heatmaps).to(dev)
                runs[f'torch-{dev.type}'] = (
                    lambda t=tensor: decode_udp_heatmaps(t, codec.input_size),
                    dev)
            diff = {}
            for name, (fn, dev) in runs.items():
                if name != 'mmpose':
                    kpts = fn()[0]
                    kpts = kpts.cpu().numpy() if torch.is_tensor(kpts) \
                        else kpts
                    diff[name] = float(np.abs(kpts - ref).max())
                time_callable(fn, dev, warmup, 0)
            # Round by round, so that load from other jobs hits all alike.
            wall = {name: [] for name in runs}
            for _ in range(repeats):
                for name, (fn, dev) in runs.items():
                    wall[name] += time_callable(fn, dev, 0, 1).times
            med = {n: 1e3 * statistics.median(v) / people
                   for n, v in wall.items()}
            low = {n: 1e3 * min(v) / people for n, v in wall.items()}
            rows.append(dict(
                heatmap_size=[h, w], num_keypoints=k, people=people,
                ms_per_person=med, min_ms_per_person=low,
                speedup=med['mmpose'] / min(
                    v for n, v in med.items() if n != 'mmpose'),
                min_speedup=low['mmpose'] / min(
                    v for n, v in low.items() if n != 'mmpose'),
                max_abs_diff_px=diff))
    return rows
