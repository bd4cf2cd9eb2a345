"""Camera geometry of depth maps and the one ``.ply`` point-cloud writer.

* :func:`camera_matrix` / :func:`intrinsics_from_fov`: a (3, 3) pinhole
  intrinsics matrix from ``fx, fy, cx, cy`` or from a field of view.
* :func:`backproject`: depth map -> camera-frame points ``X = z K^-1 (u, v,
  1)``.
* :func:`normals_from_depth`: unit surface normals from the back-projected
  points (cross product of central differences), pointing to the camera.
* :func:`write_ply`: coloured (and optionally oriented) point clouds as PLY,
  binary little-endian or ASCII. Every ``.ply`` the project writes (metric
  depth, Sapiens2 pointmaps) goes through it.

Conventions (OpenCV, the same as the synthetic generator and Sapiens2
pointmaps): X right, Y down, Z forward, pixel centres at integer ``(u, v)``,
so the image centre of a ``W x H`` image is ``((W - 1) / 2, (H - 1) / 2)``.
"""
import math
import os
from pathlib import Path
from typing import Literal, Optional, Union

import numpy as np

__all__ = [
    'camera_matrix', 'intrinsics_from_fov', 'backproject',
    'normals_from_depth', 'write_ply'
]


def camera_matrix(fx: float, fy: float, cx: float, cy: float) -> np.ndarray:
    """Pinhole intrinsics ``[[fx, 0, cx], [0, fy, cy], [0, 0, 1]]``.

    Raises:
        ValueError: A focal length is not a positive finite number.
    """
    for name, f in (('fx', fx), ('fy', fy)):
        if not (math.isfinite(float(f)) and float(f) > 0):
            raise ValueError(f'{name} must be a positive focal length in '
                             f'pixels, got {f}.')
    return np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]],
                    np.float64)


def intrinsics_from_fov(fov_deg: float,
                        width: int,
                        height: int,
                        axis: Literal['x', 'y', 'diagonal'] = 'x'
                        ) -> np.ndarray:
    """Intrinsics of a ``width x height`` camera with square pixels and the
    principal point at the image centre, from its field of view.

    Args:
        fov_deg: Field of view in degrees, in (0, 180).
        width: Image width in pixels.
        height: Image height in pixels.
        axis: The extent the field of view spans: ``'x'`` (width, the usual
            "horizontal FOV"), ``'y'`` (height) or ``'diagonal'``.

    Returns:
        (3, 3) float64 intrinsics, ``f = extent / 2 / tan(fov / 2)``.
    """
    if not 0 < float(fov_deg) < 180:
        raise ValueError(f'The field of view must be in (0, 180) degrees, '
                         f'got {fov_deg}.')
    extents = dict(x=width, y=height, diagonal=math.hypot(width, height))
    if axis not in extents:
        raise ValueError(f"axis must be 'x', 'y' or 'diagonal', got "
                         f'{axis!r}.')
    f = extents[axis] / 2.0 / math.tan(math.radians(float(fov_deg)) / 2.0)
    return camera_matrix(f, f, (width - 1) / 2.0, (height - 1) / 2.0)


def _check_depth(depth: np.ndarray) -> np.ndarray:
    depth = np.asarray(depth, np.float64)
    if depth.ndim != 2:
        raise ValueError(f'depth must be an (H, W) map, got shape '
                         f'{depth.shape}.')
    return depth


def backproject(depth: np.ndarray, K: np.ndarray) -> np.ndarray:
    """Camera-frame 3D points of a depth map.

    Args:
        depth: (H, W) depth along the optical axis (z), in the unit the
            points should have (metres for metric depth); invalid pixels
            NaN or <= 0.
        K: (3, 3) intrinsics (skew is honoured).

    Returns:
        (H, W, 3) float64 points ``z * K^-1 (u, v, 1)``; NaN where the depth
        is invalid.
    """
    depth = _check_depth(depth)
    K = np.asarray(K, np.float64)
    if K.shape != (3, 3):
        raise ValueError(f'K must be a (3, 3) matrix, got shape {K.shape}.')
    h, w = depth.shape
    v, u = np.mgrid[0:h, 0:w].astype(np.float64)
    z = np.where(np.isfinite(depth) & (depth > 0), depth, np.nan)
    fx, s, cx, fy, cy = K[0, 0], K[0, 1], K[0, 2], K[1, 1], K[1, 2]
    y = (v - cy) / fy
    x = (u - cx - s * y) / fx
    return np.stack([x * z, y * z, z], axis=-1)


def normals_from_depth(depth: np.ndarray,
                       K: np.ndarray,
                       max_rel_jump: float = 0.05) -> np.ndarray:
    """Unit surface normals of a depth map.

    The normal at a pixel is the cross product of the central differences
    of the back-projected points along the image rows and columns, oriented
    towards the camera (``n . X < 0``). It is NaN where a neighbour is
    invalid or the depth jumps by more than ``max_rel_jump`` (relative)
    between the two neighbours, i.e. across occlusion edges.

    Args:
        depth: (H, W) depth (z); invalid pixels NaN or <= 0.
        K: (3, 3) intrinsics.
        max_rel_jump: Largest ``|z(+1) - z(-1)| / z`` between the two
            neighbours of a pixel still treated as one surface. Defaults to
            0.05.

    Returns:
        (H, W, 3) float32 unit normals in the camera frame, NaN where
        undefined (the image border included).
    """
    pts = backproject(depth, K)
    z = pts[..., 2]
    normals = np.full(pts.shape, np.nan)
    du = pts[1:-1, 2:] - pts[1:-1, :-2]
    dv = pts[2:, 1:-1] - pts[:-2, 1:-1]
    n = np.cross(dv, du)
    centre = z[1:-1, 1:-1]
    with np.errstate(invalid='ignore'):
        smooth = ((np.abs(du[..., 2]) <= max_rel_jump * centre) &
                  (np.abs(dv[..., 2]) <= max_rel_jump * centre))
        norm = np.linalg.norm(n, axis=-1, keepdims=True)
        n = n / norm
        flip = (n * pts[1:-1, 1:-1]).sum(-1, keepdims=True) > 0
    n = np.where(flip, -n, n)
    ok = smooth & np.isfinite(n).all(-1) & (norm[..., 0] > 0)
    normals[1:-1, 1:-1][ok] = n[ok]
    return normals.astype(np.float32)


def write_ply(path: Union[str, Path],
              points: np.ndarray,
              colors: Optional[np.ndarray] = None,
              normals: Optional[np.ndarray] = None,
              mask: Optional[np.ndarray] = None,
              ascii: bool = False) -> int:
    """Write a point cloud as a PLY file (``element vertex`` with float
    ``x y z``, then float ``nx ny nz`` and uchar ``red green blue`` when
    given).

    Image-shaped inputs work as they are: every array is flattened over its
    leading dimensions, e.g. an (H, W, 3) pointmap with an (H, W, 3) image.
    Points that are not finite (or whose normal is not) are dropped.

    Args:
        path: Output ``.ply`` path (folders are created).
        points: (..., 3) XYZ.
        colors: (..., 3) RGB, uint8 or floats in [0, 1]; or None.
        normals: (..., 3) normals; or None.
        mask: (...) boolean selection of the points to write; or None.
        ascii: Write the ASCII variant instead of binary little-endian.

    Returns:
        The number of points written.
    """
    pts = np.asarray(points, np.float32)
    if pts.shape[-1:] != (3, ):
        raise ValueError(f'points must have shape (..., 3), got {pts.shape}.')
    lead = pts.shape[:-1]
    keep = np.isfinite(pts).all(-1)
    if mask is not None:
        mask = np.asarray(mask, bool)
        if mask.shape != lead:
            raise ValueError(f'mask {mask.shape} does not match points '
                             f'{lead}.')
        keep &= mask
    fields = [('x', '<f4'), ('y', '<f4'), ('z', '<f4')]
    columns = [pts]
    if normals is not None:
        nrm = np.asarray(normals, np.float32)
        if nrm.shape != pts.shape:
            raise ValueError(f'normals {nrm.shape} do not match points '
                             f'{pts.shape}.')
        keep &= np.isfinite(nrm).all(-1)
        fields += [('nx', '<f4'), ('ny', '<f4'), ('nz', '<f4')]
        columns.append(nrm)
    if colors is not None:
        col = np.asarray(colors)
        if col.shape != pts.shape:
            raise ValueError(f'colors {col.shape} do not match points '
                             f'{pts.shape}.')
        if col.dtype != np.uint8:
            col = np.round(np.clip(col.astype(np.float64), 0, 1) * 255)
        fields += [('red', 'u1'), ('green', 'u1'), ('blue', 'u1')]
        columns.append(col.astype(np.uint8))
    n = int(keep.sum())
    vertex = np.empty(n, dtype=fields)
    names = iter(vertex.dtype.names)
    for col in columns:
        sel = col[keep]
        for j in range(3):
            vertex[next(names)] = sel[:, j]
    types = {'<f4': 'float', 'u1': 'uchar'}
    header = ['ply',
              'format ascii 1.0' if ascii else 'format binary_little_endian '
              '1.0', 'comment written by sapiens_mm', f'element vertex {n}']
    header += [f'property {types[t]} {name}' for name, t in fields]
    header.append('end_header')
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, 'wb') as f:
        f.write(('\n'.join(header) + '\n').encode('ascii'))
        if ascii:
            fmt = ' '.join('%.9g' if t == '<f4' else '%d' for _, t in fields)
            rows = [fmt % tuple(r) for r in vertex.tolist()]
            f.write(''.join(r + '\n' for r in rows).encode('ascii'))
        else:
            f.write(vertex.tobytes())
    return n
