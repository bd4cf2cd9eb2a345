"""Batched UDP / DARK-UDP heatmap decoding, numpy on the CPU and torch on the
heatmaps' device.

mmpose's :class:`~mmpose.codecs.UDPHeatmap` (``heatmap_type='gaussian'``,
the codec of every Sapiens pose config) decodes one person at a time and
blurs each of its K heatmaps in a Python loop; for 308 heatmaps of 256x192
that is 0.2-0.4 s per person. :func:`decode_udp_heatmaps` computes the same
thing for all people and keypoints at once:

1. the integer maximum of each heatmap and its value, the keypoint score
   (``get_heatmap_maximum``; a maximum <= 0 gives the location (-1, -1));
2. each heatmap blurred by the codec's Gaussian (``blur_kernel_size``, zero
   padded, ``sigma`` from OpenCV's rule) and rescaled to its original
   maximum (``gaussian_blur``);
3. the DARK-UDP Newton step: the blurred values clipped to [1e-3, 50] and
   logged are read at the maximum and 6 neighbours of the edge-padded map,
   and the keypoint moves by ``-(H + eps I)^-1 g`` for the finite-difference
   gradient ``g`` and Hessian ``H`` (``refine_keypoints_dark_udp``);
4. heatmap pixels to input pixels: ``x / (W - 1) * input_w``.

Only the 7 values each keypoint needs are clipped and logged, not whole
maps. The neighbours are addressed exactly as mmpose addresses them in its
flattened padded array, including its wrap-around into the previous map
for a keypoint at (-1, -1), so every input decodes as mmpose decodes it.
``tests/test_heatmap_decoding.py`` checks the results against mmpose's own
decoder; ``tools/analysis/benchmark.py --decode`` times both.

Float precision follows mmpose: float32 maps, blur, clip, log and finite
differences; float64 Hessian inverse. The numpy path blurs with OpenCV as
mmpose does and matches it to float rounding everywhere. The torch path
blurs with a float32 convolution (TF32 off), which rounds differently from
OpenCV: where a heatmap has no peak and the Hessian at its maximum is
nearly singular, the Newton step amplifies that rounding and the (then
meaningless) location can differ from mmpose's; at every real peak the two
agree to float rounding.
"""
from typing import Any, Callable, Sequence, Tuple, Union

import cv2
import numpy as np
import torch
import torch.nn.functional as F

__all__ = ['decode_udp_heatmaps', 'gaussian_kernel_1d']

Array = Union[np.ndarray, torch.Tensor]
#: mmpose clips the blurred heatmaps to this range before the log.
CLIP_RANGE = (1e-3, 50.)
#: Padded-array offsets of the 7 values of the Newton step, in mmpose's
#: order: the maximum, x+1, y+1, (x+1, y+1), (x-1, y-1), x-1, y-1; in units
#: of (1, W + 2).
_NEIGHBOURS = ((0, 0), (1, 0), (0, 1), (1, 1), (-1, -1), (-1, 0), (0, -1))


def gaussian_kernel_1d(kernel_size: int) -> np.ndarray:
    """The float32 1-D kernel that ``cv2.GaussianBlur(img, (k, k), 0)``
    applies along each axis of a float32 image.

    Args:
        kernel_size: Odd size k >= 3.

    Returns:
        (k,) float32 weights summing to 1.

    Raises:
        ValueError: k is even or smaller than 3.
    """
    if int(kernel_size) != kernel_size or kernel_size < 3 or \
            kernel_size % 2 == 0:
        raise ValueError(
            f'blur_kernel_size must be an odd integer >= 3 (mmpose pads each '
            f'heatmap by (k - 1) / 2), got {kernel_size!r}.')
    return cv2.getGaussianKernel(int(kernel_size), 0,
                                 ktype=cv2.CV_32F).reshape(-1)


def _blur_numpy(maps: np.ndarray, kernel_size: int) -> np.ndarray:
    """(M, H, W) float32 -> (M, H + 2b, W + 2b), b = (k - 1) // 2: each map
    zero-padded by b and blurred by ``cv2.GaussianBlur`` as mmpose does, all
    maps in one call (stacked vertically; the 2b zero rows between two maps
    keep them apart). The interior [b:-b, b:-b] is the blurred map."""
    m, h, w = maps.shape
    b = (kernel_size - 1) // 2
    canvas = np.zeros((m, h + 2 * b, w + 2 * b), np.float32)
    canvas[:, b:b + h, b:b + w] = maps
    blurred = cv2.GaussianBlur(canvas.reshape(m * (h + 2 * b), w + 2 * b),
                               (kernel_size, kernel_size), 0)
    return blurred.reshape(m, h + 2 * b, w + 2 * b)


def _blur_torch(maps: torch.Tensor, kernel_size: int) -> torch.Tensor:
    """(M, H, W) float32 -> (M, H + 2b, W + 2b): the same zero-padded
    separable blur as :func:`_blur_numpy` (the outer b pixels are not
    blurred: only the interior is read)."""
    b = (kernel_size - 1) // 2
    k = torch.from_numpy(gaussian_kernel_1d(kernel_size)).to(maps.device)
    x = maps[:, None]
    # TF32 convolutions (the CUDA default) would round the blur to 10 bits.
    with torch.backends.cudnn.flags(enabled=True, benchmark=False,
                                    deterministic=False, allow_tf32=False):
        x = F.conv2d(x, k.view(1, 1, 1, -1), padding=(0, b))
        x = F.conv2d(x, k.view(1, 1, -1, 1), padding=(b, 0))
    return F.pad(x[:, 0], (b, b, b, b))


def _neighbour_positions(x, y, keypoint_index, num_keypoints: int, h: int,
                         w: int) -> list:
    """Where mmpose reads the 7 values of the Newton step.

    mmpose indexes the flattened, edge-padded (K, H + 2, W + 2) log maps of
    one person with ``x + 1 + (y + 1) * (W + 2) + k * (H + 2) * (W + 2)``
    plus an offset, so a keypoint at (-1, -1) (maximum <= 0) reads the end
    of the previous map (of the last map for k = 0: negative indices wrap).
    This returns, for each neighbour, (map k', row, column) in the unpadded
    (H, W) maps: edge padding is a clamp.

    Args:
        x, y: (M,) integer locations (numpy or torch int64), -1 allowed.
        keypoint_index: (M,) keypoint index k of each location.
        num_keypoints: K.
        h, w: Heatmap size.

    Returns:
        7 tuples (k', row, col) of (M,) integer arrays.
    """
    stride = w + 2
    plane = (h + 2) * stride
    base = x + 1 + (y + 1) * stride + keypoint_index * plane
    out = []
    for dx, dy in _NEIGHBOURS:
        flat = (base + dx + dy * stride) % (num_keypoints * plane)
        inner = flat % plane
        out.append((flat // plane, (inner // stride - 1).clip(0, h - 1),
                    (inner % stride - 1).clip(0, w - 1)))
    return out


def _newton_offset(values: Sequence[Array],
                   to_float64: Callable[[Any], Any]) -> Tuple[Any, Any]:
    """DARK-UDP step from the 7 logged values, in mmpose's order and
    precision (float32 differences, float64 ``inv(H + eps I) @ g``).

    Returns:
        (offset_x, offset_y), float64, to subtract from the location.
    """
    i_, ix1, iy1, ix1y1, ix1_y1_, ix1_, iy1_ = values
    dx = 0.5 * (ix1 - ix1_)
    dy = 0.5 * (iy1 - iy1_)
    dxx = ix1 - 2 * i_ + ix1_
    dyy = iy1 - 2 * i_ + iy1_
    dxy = 0.5 * (ix1y1 - ix1 - iy1 + i_ + i_ - ix1_ - iy1_ + ix1_y1_)
    eps = float(np.finfo(np.float32).eps)
    a, b, d = to_float64(dxx) + eps, to_float64(dxy), to_float64(dyy) + eps
    gx, gy = to_float64(dx), to_float64(dy)
    det = a * d - b * b
    # np.linalg.inv of [[a, b], [b, d]] (mmpose) fails on a singular matrix;
    # here such a keypoint keeps its integer location.
    singular = det == 0
    det[singular] = 1.
    off_x = (d * gx - b * gy) / det
    off_y = (a * gy - b * gx) / det
    off_x[singular] = 0.
    off_y[singular] = 0.
    return off_x, off_y


def decode_udp_heatmaps(
        heatmaps: Array,
        input_size: Sequence[int],
        blur_kernel_size: int = 11) -> Tuple[Array, Array]:
    """Decode (N, K, H, W) heatmaps as mmpose's ``UDPHeatmap.decode`` (the
    default ``'gaussian'`` type: maximum + DARK-UDP refinement) decodes each
    of the N people.

    Args:
        heatmaps: (N, K, H, W) float heatmaps: a numpy array (decoded with
            numpy and OpenCV) or a torch tensor (decoded on its device; any
            float dtype, computed in float32).
        input_size: (w, h) of the model input, the codec's ``input_size``.
        blur_kernel_size: Odd Gaussian kernel size of the modulation, the
            codec's ``blur_kernel_size``. Defaults to 11 (mmpose's default,
            used by every Sapiens config).

    Returns:
        tuple: ``keypoints`` (N, K, 2) float32 (x, y) in input pixels and
        ``scores`` (N, K) float32 (each heatmap's maximum), numpy arrays for
        numpy input, tensors on the heatmaps' device for torch input.

    Raises:
        ValueError: Not 4-D, empty maps, or a bad kernel size.
    """
    if heatmaps.ndim != 4 or heatmaps.shape[-1] < 2 or heatmaps.shape[-2] < 2:
        raise ValueError(
            f'heatmaps must be (N, K, H, W) with H, W >= 2, got shape '
            f'{tuple(heatmaps.shape)}; stack one (K, H, W) array per person.')
    gaussian_kernel_1d(blur_kernel_size)  # validates the size
    n, k, h, w = heatmaps.shape
    is_torch = isinstance(heatmaps, torch.Tensor)
    if is_torch:
        maps = heatmaps.detach().float().reshape(n * k, h, w)
        blur, to_float64 = _blur_torch, lambda t: t.double()
        arange = lambda m: torch.arange(m, device=maps.device)  # noqa: E731
    else:
        maps = np.ascontiguousarray(heatmaps, np.float32).reshape(n * k, h, w)
        blur, to_float64 = _blur_numpy, lambda a: a.astype(np.float64)
        arange = np.arange
    if n * k == 0:
        zeros = maps.new_zeros if is_torch else (
            lambda shape: np.zeros(shape, np.float32))
        return zeros((n, k, 2)), zeros((n, k))
    flat = maps.reshape(n * k, h * w)
    index = flat.argmax(1)
    scores = flat.max(1)
    if is_torch:
        scores = scores.values
    x, y = index % w, index // w
    x[scores <= 0] = -1  # get_heatmap_maximum: (-1, -1) for a maximum <= 0
    y[scores <= 0] = -1

    b = (blur_kernel_size - 1) // 2
    padded = blur(maps, blur_kernel_size)  # (M, H + 2b, W + 2b)
    interior = padded[:, b:b + h, b:b + w].reshape(n * k, -1)
    peak = interior.max(1)
    if is_torch:
        peak = peak.values
    rescale = scores / peak  # gaussian_blur: back to the original maximum

    keypoint = arange(n * k) % k
    person = arange(n * k) // k
    pw = w + 2 * b
    values = []
    for map_k, row, col in _neighbour_positions(x, y, keypoint, k, h, w):
        map_index = person * k + map_k
        v = padded.reshape(-1)[map_index * (padded.shape[1] * pw) +
                               (row + b) * pw + col + b]
        v = v * rescale[map_index]
        values.append(v.clip(*CLIP_RANGE).log() if is_torch else
                      np.log(np.clip(v, *CLIP_RANGE)))
    off_x, off_y = _newton_offset(values, to_float64)
    kx = to_float64(x) - off_x
    ky = to_float64(y) - off_y
    if is_torch:  # float32 rounding of the refined location, as in mmpose
        kx, ky = kx.float().double(), ky.float().double()
    else:
        kx, ky = kx.astype(np.float32), ky.astype(np.float32)
    keypoints = (kx / (w - 1) * float(input_size[0]),
                 ky / (h - 1) * float(input_size[1]))
    if is_torch:
        out = torch.stack(keypoints, -1).float().reshape(n, k, 2)
    else:
        out = np.stack(keypoints, -1).astype(np.float32).reshape(n, k, 2)
    return out, scores.reshape(n, k)
