"""Pipeline transforms for Sapiens dense targets: relative depth, surface
normals, and Sapiens2's pointmaps and albedo.

Loading puts these arrays in ``results`` and lists them in ``seg_fields``:

* ``gt_fg_mask``: (H, W) uint8, 1 on the person, 0 elsewhere;
* ``gt_depth_map``: (H, W) float32 depth;
* ``gt_normal_map``: (H, W, 3) float32 camera-frame normals;
* ``gt_pointmap``: (H, W, 3) float32 camera-frame XYZ;
* ``gt_albedo_map``: (H, W, 3) float32 RGB albedo.

Because they are ``seg_fields``, mmseg's geometric transforms (``Resize``,
``RandomResize``, ``RandomCrop``) move them with the image using nearest
interpolation, so image, mask and targets stay pixel-aligned. The flip and
rotation here add what is specific to these targets (a flip negates the X of
a normal or a point; rotation pads with background). The ``Generate*Target``
transforms come last and turn the arrays into training targets.

A sample with no annotation key at all (no ``mask_path``, ``depth_path``,
``normal_path``, ``pointmap_path`` or ``albedo_path``: an image given to ``mmseg.apis.inference_model`` or
``MMSegInferencer``, which only strip mmseg's own ``LoadAnnotations``) goes
through ``LoadDenseAnnotations`` and the ``Generate*Target`` steps
unchanged, so the shipped test pipelines also run on bare images. A sample
of a dataset (which always has the keys) still needs its files.
"""
import io
from typing import Optional, Sequence, Tuple

import mmcv
import numpy as np
from mmcv.transforms import BaseTransform, to_tensor
from mmengine import fileio
from mmengine.structures import PixelData
from mmseg.datasets.transforms import PackSegInputs, RandomFlip, RandomRotate
from mmseg.registry import TRANSFORMS

__all__ = [
    'LoadDenseAnnotations', 'GenerateDepthTarget', 'GenerateNormalTarget',
    'GeneratePointmapTarget', 'GenerateAlbedoTarget', 'DenseRandomFlip',
    'DenseRandomRotate', 'PackDenseInputs', 'fit_intrinsics'
]

_NORMAL_EPS = 1e-6
_ANNOTATION_KEYS = ('mask_path', 'depth_path', 'normal_path', 'pointmap_path',
                    'albedo_path')


def _image_only(results: dict) -> bool:
    """Whether ``results`` is a bare image (no annotation key at all)."""
    return not any(key in results for key in _ANNOTATION_KEYS)


def _add_seg_field(results: dict, key: str) -> None:
    fields = results.setdefault('seg_fields', [])
    if key not in fields:
        fields.append(key)


def _foreground(results: dict, target_fg: np.ndarray) -> np.ndarray:
    """``gt_fg_mask > 0`` (if loaded) and the target's own validity."""
    mask = results.get('gt_fg_mask')
    if mask is None:
        return target_fg
    if mask.shape[:2] != target_fg.shape[:2]:
        raise ValueError(
            f'gt_fg_mask {mask.shape[:2]} and the target '
            f'{target_fg.shape[:2]} are not aligned; transform them together'
            ' (keep both in seg_fields).')
    return (mask > 0) & target_fg


@TRANSFORMS.register_module()
class LoadDenseAnnotations(BaseTransform):
    """Load the foreground mask and the depth / normal arrays of a sample.

    Reads ``results['mask_path']`` (a PNG; foreground = any channel > 0, so
    class-id masks and binary masks both work), ``results['depth_path']``
    ((H, W) or (H, W, 1) ``.npy``), ``results['normal_path']``,
    ``results['pointmap_path']`` and ``results['albedo_path']`` ((H, W, 3)
    ``.npy`` each), whichever are present. Without a mask the foreground is
    where the target is valid (finite positive depth, finite non-zero
    normal, finite point with positive Z, finite non-negative albedo).
    Arrays whose size differs from the original image (``ori_shape``) are
    resized to it with nearest interpolation.

    Put it before the geometric transforms in training pipelines, and after
    ``Resize`` in test pipelines (the prediction is returned at the original
    size, where the metric compares it with these arrays).

    Added keys: ``gt_fg_mask``, ``gt_depth_map``, ``gt_normal_map``,
    ``gt_pointmap``, ``gt_albedo_map`` (see the module docstring), all
    appended to ``seg_fields``. A bare image (none of the path keys) is
    passed through unchanged.

    Args:
        imdecode_backend: Mask decoding backend. Defaults to ``'cv2'``.
        backend_args: mmengine file backend arguments.
    """

    def __init__(self,
                 imdecode_backend: str = 'cv2',
                 backend_args: Optional[dict] = None) -> None:
        self.imdecode_backend = imdecode_backend
        self.backend_args = backend_args

    def _load_npy(self, path: str) -> np.ndarray:
        data = fileio.get(path, backend_args=self.backend_args)
        return np.load(io.BytesIO(data), allow_pickle=False)

    @staticmethod
    def _fit(array: np.ndarray, shape) -> np.ndarray:
        if shape is None or tuple(array.shape[:2]) == tuple(shape[:2]):
            return array
        h, w = shape[:2]
        return mmcv.imresize(array, (w, h), interpolation='nearest')

    def transform(self, results: dict) -> dict:
        """Load the arrays named in ``results``."""
        if _image_only(results):
            return results
        shape = results.get('ori_shape')
        if shape is None and results.get('img') is not None:
            shape = results['img'].shape[:2]
        target_fg = None
        if results.get('depth_path'):
            path = results['depth_path']
            depth = self._load_npy(path)
            if depth.ndim == 3 and depth.shape[-1] == 1:
                depth = depth[..., 0]
            if depth.ndim != 2:
                raise ValueError(f'{path}: a depth map must be (H, W), got '
                                 f'shape {depth.shape}.')
            depth = self._fit(depth.astype(np.float32), shape)
            results['gt_depth_map'] = depth
            _add_seg_field(results, 'gt_depth_map')
            target_fg = np.isfinite(depth) & (depth > 0)
        if results.get('normal_path'):
            path = results['normal_path']
            normal = self._load_npy(path)
            if normal.ndim != 3 or normal.shape[-1] != 3:
                raise ValueError(f'{path}: a normal map must be (H, W, 3), '
                                 f'got shape {normal.shape}.')
            normal = self._fit(normal.astype(np.float32), shape)
            results['gt_normal_map'] = normal
            _add_seg_field(results, 'gt_normal_map')
            fg = np.isfinite(normal).all(-1) & (np.linalg.norm(
                np.nan_to_num(normal), axis=-1) > _NORMAL_EPS)
            target_fg = fg if target_fg is None else target_fg & fg
        for key, name, valid in (
                ('pointmap_path', 'gt_pointmap',
                 lambda a: np.isfinite(a).all(-1) & (a[..., 2] > 0)),
                ('albedo_path', 'gt_albedo_map',
                 lambda a: (np.isfinite(a) & (a >= 0)).all(-1))):
            if not results.get(key):
                continue
            path = results[key]
            array = self._load_npy(path)
            if array.ndim != 3 or array.shape[-1] != 3:
                raise ValueError(f'{path}: a {name[3:]} file must be '
                                 f'(H, W, 3), got shape {array.shape}.')
            array = self._fit(array.astype(np.float32), shape)
            results[name] = array
            _add_seg_field(results, name)
            fg = valid(array)
            target_fg = fg if target_fg is None else target_fg & fg
        if results.get('mask_path'):
            path = results['mask_path']
            mask = mmcv.imfrombytes(
                fileio.get(path, backend_args=self.backend_args),
                flag='unchanged', backend=self.imdecode_backend)
            if mask is None:
                raise ValueError(f'Cannot decode the mask {path}.')
            if mask.ndim == 3:
                mask = (mask[..., :3] > 0).any(-1)
            fg = self._fit((mask > 0).astype(np.uint8), shape)
        elif target_fg is not None:
            fg = target_fg.astype(np.uint8)
        else:
            raise KeyError('LoadDenseAnnotations needs mask_path, depth_path, '
                           'normal_path, pointmap_path or albedo_path in the '
                           'sample (they are all empty); build it with '
                           'DenseFolderDataset.')
        results['gt_fg_mask'] = fg
        _add_seg_field(results, 'gt_fg_mask')
        return results

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(imdecode_backend='
                f'{self.imdecode_backend!r})')


@TRANSFORMS.register_module()
class GenerateDepthTarget(BaseTransform):
    """Turn ``gt_depth_map`` into the Sapiens relative-depth target.

    Foreground = ``gt_fg_mask > 0`` (if loaded) and finite depth. With
    ``normalize=True`` the foreground depth is min-max normalised per image
    to [0, 1] (nearest surface 0, farthest 1; a constant depth becomes 0);
    with ``normalize=False`` it is kept as is (used by the evaluation
    pipelines, where the metric aligns the prediction to the raw depth).
    Everything else is set to ``background_value``.

    Modified key: ``gt_depth_map`` (float32). Added keys: ``depth_min`` and
    ``depth_max``, the foreground range before normalisation (NaN when
    there is no foreground).

    Args:
        normalize: Min-max normalise the foreground. Defaults to True.
        background_value: Value outside the foreground. Must be <= 0 so the
            loss and the metric treat it as invalid. Defaults to -1.
    """

    def __init__(self, normalize: bool = True,
                 background_value: float = -1.0) -> None:
        if background_value > 0:
            raise ValueError(
                f'background_value must be <= 0 (got {background_value}): '
                'depth losses and metrics only use pixels with positive '
                'targets.')
        self.normalize = normalize
        self.background_value = float(background_value)

    def transform(self, results: dict) -> dict:
        """Write the target into ``gt_depth_map`` (a bare image passes
        through)."""
        if results.get('gt_depth_map') is None and _image_only(results):
            return results
        if results.get('gt_depth_map') is None:
            raise KeyError('GenerateDepthTarget needs gt_depth_map; put '
                           'LoadDenseAnnotations before it.')
        depth = results['gt_depth_map'].astype(np.float32)
        fg = _foreground(results, np.isfinite(depth))
        target = np.full_like(depth, self.background_value)
        if fg.any():
            values = depth[fg]
            d_min, d_max = float(values.min()), float(values.max())
            if self.normalize:
                span = d_max - d_min
                values = ((values - d_min) / span if span > 0 else
                          np.zeros_like(values))
            target[fg] = values
        else:
            d_min = d_max = float('nan')
        results['gt_depth_map'] = target
        results['depth_min'], results['depth_max'] = d_min, d_max
        _add_seg_field(results, 'gt_depth_map')
        return results

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(normalize={self.normalize}, '
                f'background_value={self.background_value})')


@TRANSFORMS.register_module()
class GenerateNormalTarget(BaseTransform):
    """Turn ``gt_normal_map`` into unit normals with an invalid background.

    Foreground = ``gt_fg_mask > 0`` (if loaded) and a finite, non-zero
    normal; its vectors are L2-normalised. The background becomes the zero
    vector, which losses and metrics skip.

    Modified key: ``gt_normal_map`` ((H, W, 3) float32).
    """

    def transform(self, results: dict) -> dict:
        """Write the target into ``gt_normal_map`` (a bare image passes
        through)."""
        if results.get('gt_normal_map') is None and _image_only(results):
            return results
        if results.get('gt_normal_map') is None:
            raise KeyError('GenerateNormalTarget needs gt_normal_map; put '
                           'LoadDenseAnnotations before it.')
        normal = np.nan_to_num(results['gt_normal_map'].astype(np.float32),
                               nan=0.0, posinf=0.0, neginf=0.0)
        finite = np.isfinite(results['gt_normal_map']).all(-1)
        length = np.linalg.norm(normal, axis=-1)
        fg = _foreground(results, finite & (length > _NORMAL_EPS))
        target = np.zeros_like(normal)
        target[fg] = normal[fg] / length[fg][:, None]
        results['gt_normal_map'] = target
        _add_seg_field(results, 'gt_normal_map')
        return results


def fit_intrinsics(pointmap: np.ndarray,
                   valid: np.ndarray) -> Optional[Tuple[float, ...]]:
    """Pinhole intrinsics that project a pointmap onto its pixel grid.

    Least squares of ``u = fx X/Z + cx`` and ``v = fy Y/Z + cy`` over the
    valid pixels (pixel centres at integer ``(u, v)``, as in
    :func:`sapiens_mm.utils.pointcloud.backproject`). After resizing,
    cropping and flipping a pointmap with the image, this recovers the
    camera of the augmented image without tracking it through the pipeline (nearest-neighbour
    resampling moves a point by at most half a pixel).

    Args:
        pointmap: (H, W, 3) camera-frame XYZ.
        valid: (H, W) bool mask with ``Z > 0`` and finite points.

    Returns:
        ``(fx, fy, cx, cy)``, or None when the rays span no width or height
        (fewer than two distinct columns or rows).
    """
    v, u = np.nonzero(valid)
    if u.size < 2:
        return None
    p = pointmap[v, u].astype(np.float64)
    out = []
    for ray, pix in ((p[:, 0] / p[:, 2], u), (p[:, 1] / p[:, 2], v)):
        ray_c = ray - ray.mean()
        var = (ray_c**2).mean()
        if var <= 1e-12:
            return None
        f = float((ray_c * (pix - pix.mean())).mean() / var)
        out.append((f, float(pix.mean() - f * ray.mean())))
    (fx, cx), (fy, cy) = out
    if fx <= 0 or fy <= 0:
        return None
    return fx, fy, cx, cy


@TRANSFORMS.register_module()
class GeneratePointmapTarget(BaseTransform):
    """Turn the metric ``gt_pointmap`` into the Sapiens2 training target.

    Foreground = ``gt_fg_mask > 0`` (if loaded), finite and ``Z > 0``; the
    rest becomes the zero vector (invalid for the losses and the metric).
    The camera of the (augmented) image is fitted to the foreground with
    :func:`fit_intrinsics`; with ``s = canonical_focal / fx`` the target is
    the pointmap seen by a camera of focal ``canonical_focal``, i.e. the
    metric pointmap times ``s``. With ``canonical=False`` (evaluation) the
    pointmap stays metric and only the background is cleared.

    Modified key: ``gt_pointmap`` ((H, W, 3) float32). Added keys:
    ``pointmap_scale`` (``s``; NaN when no camera can be fitted) and
    ``pointmap_intrinsics`` (``(fx, fy, cx, cy)``, NaN likewise).

    Args:
        canonical_focal: Focal length (pixels) of the canonical camera.
            Defaults to 768 (official, for 1024x768 inputs; scale it with
            the input width).
        canonical: Scale to the canonical camera. Defaults to True.
    """

    def __init__(self, canonical_focal: float = 768.0,
                 canonical: bool = True) -> None:
        if canonical_focal <= 0:
            raise ValueError(f'canonical_focal must be positive, got '
                             f'{canonical_focal}.')
        self.canonical_focal = float(canonical_focal)
        self.canonical = canonical

    def transform(self, results: dict) -> dict:
        """Write the target and the camera into ``results``."""
        if results.get('gt_pointmap') is None and _image_only(results):
            return results  # a bare image (mmseg's inference APIs)
        if results.get('gt_pointmap') is None:
            raise KeyError('GeneratePointmapTarget needs gt_pointmap; put '
                           'LoadDenseAnnotations before it.')
        points = results['gt_pointmap'].astype(np.float32)
        finite = np.isfinite(points).all(-1)
        fg = _foreground(results, finite & (np.nan_to_num(points[..., 2]) >
                                            0))
        camera = fit_intrinsics(points, fg)
        nan = float('nan')
        scale = self.canonical_focal / camera[0] if camera else nan
        target = np.zeros_like(points)
        if not self.canonical:
            target[fg] = points[fg]
        elif camera is not None:  # without a camera, no canonical target
            target[fg] = points[fg] * scale
        results['gt_pointmap'] = target
        results['pointmap_scale'] = scale
        results['pointmap_intrinsics'] = camera or (nan, ) * 4
        _add_seg_field(results, 'gt_pointmap')
        return results

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(canonical_focal='
                f'{self.canonical_focal}, canonical={self.canonical})')


@TRANSFORMS.register_module()
class GenerateAlbedoTarget(BaseTransform):
    """Mask ``gt_albedo_map``: the foreground (``gt_fg_mask > 0`` if loaded,
    finite, non-negative) keeps its RGB clipped to [0, 1], the rest becomes
    -1 (invalid for :class:`~sapiens_mm.models.losses.AlbedoLoss`).

    Modified key: ``gt_albedo_map`` ((H, W, 3) float32).
    """

    def transform(self, results: dict) -> dict:
        """Write the target into ``gt_albedo_map``."""
        if results.get('gt_albedo_map') is None and _image_only(results):
            return results  # a bare image (mmseg's inference APIs)
        if results.get('gt_albedo_map') is None:
            raise KeyError('GenerateAlbedoTarget needs gt_albedo_map; put '
                           'LoadDenseAnnotations before it.')
        albedo = results['gt_albedo_map'].astype(np.float32)
        fg = _foreground(results, (np.isfinite(albedo) & (albedo >= 0)).all(
            -1))
        target = np.full_like(albedo, -1.0)
        target[fg] = np.clip(albedo[fg], 0.0, 1.0)
        results['gt_albedo_map'] = target
        _add_seg_field(results, 'gt_albedo_map')
        return results


@TRANSFORMS.register_module()
class DenseRandomFlip(RandomFlip):
    """mmseg ``RandomFlip`` that also mirrors normal vectors and points.

    The image and every ``seg_fields`` array are flipped; in
    ``gt_normal_map`` and ``gt_pointmap`` a horizontal flip negates X, a
    vertical flip negates Y and a diagonal flip negates both (camera frame:
    the mirrored scene seen by the same camera). Depth and albedo values
    are unchanged. Arguments are those of ``RandomFlip`` (``prob``,
    ``direction``).
    """

    _NEGATE = dict(horizontal=(0, ), vertical=(1, ), diagonal=(0, 1))

    def _flip(self, results: dict) -> None:
        super()._flip(results)
        for key in ('gt_normal_map', 'gt_pointmap'):
            vectors = results.get(key)
            if vectors is not None:
                vectors = vectors.copy()
                for channel in self._NEGATE[results['flip_direction']]:
                    vectors[..., channel] = -vectors[..., channel]
                results[key] = vectors


@TRANSFORMS.register_module()
class DenseRandomRotate(RandomRotate):
    """Random in-plane rotation of the image, mask and depth.

    mmseg ``RandomRotate`` with ``seg_pad_val=0`` by default, so pixels
    rotated in from outside are background (mask 0, depth 0) and never
    become targets. Depth values are kept (an in-plane rotation about the
    optical axis does not change camera z). Normal maps are refused: their
    vectors would have to be rotated too, and the official normal pipeline
    uses no rotation.

    Args:
        prob: Rotation probability.
        degree: Range (min, max) of the angle, or ``d`` for (-d, d).
        pad_val: Image padding value. Defaults to 0.
        seg_pad_val: Padding of ``seg_fields``. Defaults to 0 (background).
        center: Rotation centre; None for the image centre.
        auto_bound: Grow the canvas to keep the whole image.
    """

    def __init__(self,
                 prob: float,
                 degree,
                 pad_val: float = 0,
                 seg_pad_val: float = 0,
                 center: Optional[Sequence[float]] = None,
                 auto_bound: bool = False) -> None:
        super().__init__(prob=prob, degree=degree, pad_val=pad_val,
                         seg_pad_val=seg_pad_val, center=center,
                         auto_bound=auto_bound)

    def transform(self, results: dict) -> dict:
        """Rotate the image and the ``seg_fields`` arrays."""
        for key in ('gt_normal_map', 'gt_pointmap'):
            if results.get(key) is not None:
                raise ValueError(
                    f'DenseRandomRotate rotates depth only: rotating '
                    f'{key} needs its vectors rotated as well. Remove it '
                    'from normal and pointmap pipelines.')
        return super().transform(results)


@TRANSFORMS.register_module()
class PackDenseInputs(PackSegInputs):
    """Pack the image and the dense targets into a ``SegDataSample``.

    ``gt_depth_map`` (H, W) becomes ``data_sample.gt_depth_map`` (1, H, W);
    ``gt_normal_map``, ``gt_pointmap`` and ``gt_albedo_map`` (H, W, 3)
    become (3, H, W) fields of the same name, matting's ``gt_alpha`` (H, W)
    a (1, H, W) and ``gt_matting`` (H, W, 10) a (10, H, W) field; all
    float32.

    Args:
        meta_keys: Keys copied into the sample's meta information.
    """

    def __init__(self,
                 meta_keys: Sequence[str] = (
                     'img_path', 'mask_path', 'depth_path', 'normal_path',
                     'pointmap_path', 'albedo_path', 'ori_shape',
                     'img_shape', 'pad_shape', 'scale_factor', 'flip',
                     'flip_direction', 'depth_min', 'depth_max',
                     'img_padding_size', 'pointmap_scale',
                     'pointmap_intrinsics', 'alpha_path', 'fg_path',
                     'bg_path')
                 ) -> None:
        super().__init__(meta_keys=tuple(meta_keys))

    def transform(self, results: dict) -> dict:
        """Pack ``img`` and the targets present in ``results``."""
        depth = results.get('gt_depth_map')
        if depth is not None:
            results['gt_depth_map'] = np.ascontiguousarray(depth, np.float32)
        packed = super().transform(results)
        for key in ('gt_normal_map', 'gt_pointmap', 'gt_albedo_map',
                    'gt_matting', 'gt_alpha'):
            array = results.get(key)
            if array is not None:
                if array.ndim == 2:
                    array = array[..., None]
                data = to_tensor(
                    np.ascontiguousarray(array.transpose(2, 0, 1),
                                         np.float32))
                packed['data_samples'].set_data({key: PixelData(data=data)})
        return packed
