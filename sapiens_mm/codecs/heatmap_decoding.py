"""Batched UDP / DARK-UDP heatmap decoding, numpy on the CPU and torch on the
heatmaps' device.

mmpose's :class:`~mmpose.codecs.UDPHeatmap` (``heatmap_type='gaussian'``,
the codec of every Sapiens pose config) decodes one person at a time and
blurs each of its K heatmaps in a Python loop; for 308 heatmaps of 256x192
that is 0.2-0.4 s per person. :func:`decode_udp_heatmaps` computes the same
thing for all people and keypoints at once. mmpose's steps:

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

The blur is only needed at the 3 x 3 pixels around each maximum: the
rescaling factor (>= 1) adds the same log to all 7 values and cancels in the
finite differences unless a value is clipped. So each maximum's blurred
3 x 3 neighbourhood is computed from its 13 x 13 patch, and only where that
cannot be exact does the keypoint take mmpose's whole-map route (whole maps
blurred, rescaled, clipped; neighbours addressed exactly as mmpose
addresses its flattened padded array, including the wrap-around into the
previous map for a keypoint at (-1, -1)): a maximum <= 0, a neighbour value
near the clip floor, or a weak or nearly singular Hessian (a wide or no
clear peak), where float rounding could move the Newton step by more than
8e-4 input pixels.
A heatmap's single pass for its maximum is then most of the cost.

Float precision follows mmpose: float32 maps, blur, clip, log and finite
differences; float64 Hessian inverse. Keypoints agree with mmpose's to
float rounding (``tests/codecs/test_heatmap_decoding.py``: under 3e-4 input pixels
on clear and noisy heatmaps; ``tools/analysis/benchmark.py --decode``
times both and prints the difference). The whole-map route blurs with
OpenCV in the numpy path, as mmpose does, and with a float32 convolution
(TF32 off) in the torch path, which rounds differently: for a heatmap with
no peak, where the Newton step amplifies rounding, the torch path's (then
meaningless) location can differ from mmpose's.
"""
from typing import Sequence, Tuple, Union

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


class _Backend:
    """The few operations that differ between numpy and torch."""

    def __init__(self, like: Array) -> None:
        self.torch = isinstance(like, torch.Tensor)
        self.device = like.device if self.torch else None

    def const(self, a: np.ndarray) -> Array:
        return torch.from_numpy(a).to(self.device) if self.torch else a

    def arange(self, n: int) -> Array:
        return torch.arange(n, device=self.device) if self.torch \
            else np.arange(n)

    def log(self, a: Array) -> Array:
        return a.log() if self.torch else np.log(a)

    def f64(self, a: Array) -> Array:
        return a.double() if self.torch else a.astype(np.float64)

    def f32(self, a: Array) -> Array:
        return a.float() if self.torch else a.astype(np.float32)

    def nonzero(self, mask: Array) -> Array:
        return mask.nonzero()[:, 0] if self.torch else np.flatnonzero(mask)

    def unique(self, a: Array) -> Array:
        return torch.unique(a) if self.torch else np.unique(a)

    def searchsorted(self, sorted_a: Array, v: Array) -> Array:
        return torch.searchsorted(sorted_a, v) if self.torch \
            else np.searchsorted(sorted_a, v)

    def stack(self, arrays, axis: int) -> Array:
        return torch.stack(arrays, axis) if self.torch \
            else np.stack(arrays, axis)

    def blur(self, maps: Array, kernel_size: int) -> Array:
        return _blur_torch(maps, kernel_size) if self.torch \
            else _blur_numpy(maps, kernel_size)


def _patch_values(be: _Backend, maps: Array, sel: Array, x: Array, y: Array,
                  kernel_size: int) -> Tuple[list, Array]:
    """Blurred values at the 7 Newton-step neighbours of each selected
    maximum (not rescaled: see :func:`decode_udp_heatmaps`), from the
    (k + 2) x (k + 2) patch of the map around it, zero outside the map.

    Returns:
        The 7 (S,) float32 value arrays, in mmpose's order, and the (S,)
        bool mask of the maxima at which every value is at least the clip
        floor (so that clipping cannot apply).
    """
    m, h, w = maps.shape
    b = (kernel_size - 1) // 2
    r = b + 1
    span = be.arange(2 * r + 1) - r
    rows = y[:, None] + span[None]  # (S, 2r + 1)
    cols = x[:, None] + span[None]
    inside = (((rows >= 0) & (rows < h))[:, :, None] &
              ((cols >= 0) & (cols < w))[:, None, :])
    flat_index = (sel[:, None, None] * (h * w) +
                  rows.clip(0, h - 1)[:, :, None] * w +
                  cols.clip(0, w - 1)[:, None, :])
    patch = maps.reshape(-1)[flat_index] * inside  # (S, 2r + 1, 2r + 1)
    g = gaussian_kernel_1d(kernel_size)
    band = np.zeros((2 * r + 1, 3), np.float32)  # band[c, j] = g[c - j]
    for j in range(3):
        band[j:j + kernel_size, j] = g
    band = be.const(band)
    # Products and sums, not matmuls: those may run in TF32 on a GPU.
    rows = (patch[..., None] * band).sum(-2)  # (S, 2r + 1, 3)
    grid = (rows[:, :, None, :] * band[None, :, :, None]).sum(1)  # (S, 3, 3)
    values = []
    for dx, dy in _NEIGHBOURS:
        gi = (y + dy).clip(0, h - 1) - y + 1  # edge padding = clamping
        gj = (x + dx).clip(0, w - 1) - x + 1
        values.append(grid[be.arange(len(sel)), gi, gj])
    floor = CLIP_RANGE[0] * (1 + 1e-4)  # margin: float rescale ~ 1
    ok = values[0] >= floor
    for v in values[1:]:
        ok = ok & (v >= floor)
    return values, ok


def _exact_values(be: _Backend, maps: Array, sel: Array, x: Array, y: Array,
                  scores: Array, num_keypoints: int,
                  kernel_size: int) -> list:
    """The 7 clipped, logged Newton-step values of the selected maxima as
    mmpose computes them: whole maps blurred and rescaled, neighbours read
    where mmpose reads them (:func:`_neighbour_positions`)."""
    m, h, w = maps.shape
    k = num_keypoints
    b = (kernel_size - 1) // 2
    positions = _neighbour_positions(x, y, sel % k, k, h, w)
    person = sel // k
    map_ids = [person * k + map_k for map_k, _, _ in positions]
    needed = be.unique(be.stack(map_ids, 0).reshape(-1))
    padded = be.blur(maps[needed], kernel_size)  # (U, H + 2b, W + 2b)
    peak = padded[:, b:b + h, b:b + w].reshape(len(needed), -1).max(1)
    peak = peak.values if be.torch else peak
    rescale = scores[needed] / peak  # gaussian_blur: back to the maximum
    ph, pw = padded.shape[1:]
    values = []
    for (_, row, col), ids in zip(positions, map_ids):
        u = be.searchsorted(needed, ids)
        v = padded.reshape(-1)[u * (ph * pw) + (row + b) * pw + col + b]
        values.append(be.log((v * rescale[u]).clip(*CLIP_RANGE)))
    return values


def _newton_offset(be: _Backend, values: Sequence[Array]) -> Tuple:
    """DARK-UDP step from the 7 logged values, in mmpose's order and
    precision (float32 differences, float64 ``inv(H + eps I) @ g``).

    Returns:
        (offset_x, offset_y) to subtract from the location and a bound on
        how far float32 rounding of the values (1e-6 each) can move the
        result, all float64, in heatmap pixels.
    """
    i_, ix1, iy1, ix1y1, ix1_y1_, ix1_, iy1_ = values
    dx = 0.5 * (ix1 - ix1_)
    dy = 0.5 * (iy1 - iy1_)
    dxx = ix1 - 2 * i_ + ix1_
    dyy = iy1 - 2 * i_ + iy1_
    dxy = 0.5 * (ix1y1 - ix1 - iy1 + i_ + i_ - ix1_ - iy1_ + ix1_y1_)
    eps = float(np.finfo(np.float32).eps)
    a, b, d = be.f64(dxx) + eps, be.f64(dxy), be.f64(dyy) + eps
    gx, gy = be.f64(dx), be.f64(dy)
    det = a * d - b * b
    # np.linalg.inv of [[a, b], [b, d]] (mmpose) fails on a singular matrix;
    # here such a keypoint keeps its integer location.
    singular = det == 0
    det[singular] = 1.
    off_x = (d * gx - b * gy) / det
    off_y = (a * gy - b * gx) / det
    off_x[singular] = 0.
    off_y[singular] = 0.
    inv_norm = (a * a + 2 * b * b + d * d)**0.5 / abs(det)
    bound = inv_norm * 1e-6 * (1 + (off_x * off_x + off_y * off_y)**0.5)
    bound[singular] = float('inf')
    return off_x, off_y, bound


#: Largest rounding bound (input pixels) of a keypoint decoded from patch
#: values, under the 1e-3 px the decoder promises (the bound assumes 1e-6
#: of rounding per value; the differences seen stay 3x or more below it);
#: above it (a wide or no clear peak: a weak or nearly singular Hessian)
#: the keypoint is decoded again from whole blurred maps, as mmpose does.
PATCH_BOUND_PX = 8e-4


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
    be = _Backend(heatmaps)
    if be.torch:
        maps = heatmaps.detach().float().reshape(n * k, h, w)
    else:
        maps = np.ascontiguousarray(heatmaps, np.float32).reshape(n * k, h, w)
    if n * k == 0:
        zeros = maps.new_zeros if be.torch else (
            lambda shape: np.zeros(shape, np.float32))
        return zeros((n, k, 2)), zeros((n, k))
    flat = maps.reshape(n * k, h * w)
    index = flat.argmax(1)
    all_maps = be.arange(n * k)
    scores = flat[all_maps, index]
    x, y = index % w, index // w
    x[scores <= 0] = -1  # get_heatmap_maximum: (-1, -1) for a maximum <= 0
    y[scores <= 0] = -1

    # Where no value can be clipped, the rescaling of the blurred map (a
    # factor s >= 1: blurring cannot raise the maximum) only adds log(s) to
    # the 7 logged values, which cancels in every finite difference: the
    # blur is needed at 9 pixels, not over the whole map.
    found = be.nonzero(scores > 0)
    values = [maps.new_zeros(n * k) if be.torch else
              np.zeros(n * k, np.float32) for _ in _NEIGHBOURS]
    exact = scores <= 0
    if len(found):
        patch, ok = _patch_values(be, maps, found, x[found], y[found],
                                  blur_kernel_size)
        for v, p in zip(values, patch):
            v[found] = be.log(p.clip(CLIP_RANGE[0], None))
        exact[found[~ok]] = True
        exact[found[scores[found] >= CLIP_RANGE[1]]] = True
    off_x, off_y, bound = _newton_offset(be, values)
    stride = max(float(input_size[0]) / (w - 1),
                 float(input_size[1]) / (h - 1))  # input px per heatmap px
    exact = exact | (bound * stride > PATCH_BOUND_PX)
    if exact.any():
        sel = be.nonzero(exact)
        redo = _exact_values(be, maps, sel, x[sel], y[sel], scores, k,
                             blur_kernel_size)
        ex_x, ex_y, _ = _newton_offset(be, redo)
        off_x[sel], off_y[sel] = ex_x, ex_y
    kx = be.f64(be.f32(be.f64(x) - off_x))  # float32, as mmpose rounds it
    ky = be.f64(be.f32(be.f64(y) - off_y))
    out = be.stack((kx / (w - 1) * float(input_size[0]),
                    ky / (h - 1) * float(input_size[1])), -1)
    return be.f32(out).reshape(n, k, 2), scores.reshape(n, k)
