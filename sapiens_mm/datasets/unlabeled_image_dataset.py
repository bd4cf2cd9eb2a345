"""A dataset of unlabeled images for MAE pretraining.

Images come from a folder (scanned recursively) or from a manifest file such
as the one ``tools/curate_images.py`` writes. The dataset decodes the images
itself, so that a file that cannot be read (corrupt, truncated, not an image,
deleted since the scan) is skipped, counted and logged instead of stopping a
run that may last weeks.
"""
import os.path as osp
from typing import Dict, List, Literal, Optional, Sequence, Set, Union

from mmcv.transforms import LoadImageFromFile
from mmengine.dataset import BaseDataset
from mmengine.logging import print_log
from mmpretrain.registry import DATASETS

from sapiens_mm.utils.image_io import (IMAGE_EXTENSIONS, UnreadableImageError,
                                       list_images, read_image)

__all__ = ['read_manifest', 'UnlabeledImageDataset']


def read_manifest(path: str) -> List[str]:
    """Read an image manifest: one path per line.

    Blank lines and lines starting with ``#`` are ignored. Paths are
    returned as written (relative paths are resolved by the caller).
    """
    if not osp.isfile(path):
        raise FileNotFoundError(
            f'Manifest not found: {path}. Write one image path per line '
            '(tools/curate_images.py does), or leave ann_file empty to scan '
            'the image folder.')
    with open(path, encoding='utf-8') as f:
        lines = [line.strip() for line in f]
    return [line for line in lines if line and not line.startswith('#')]



@DATASETS.register_module()
class UnlabeledImageDataset(BaseDataset):
    """Unlabeled images from a folder (recursive) or a manifest file.

    The dataset decodes each image itself and passes
    ``dict(img=(H, W, 3) uint8 BGR, img_path, img_shape, ori_shape)`` to the
    pipeline, which therefore must **not** start with ``LoadImageFromFile``.
    An image that cannot be read is skipped: another image is drawn in its
    place (a random one during training, the next one in ``test_mode``), the
    file is remembered (it is not retried) and a warning with the running
    count is logged. :attr:`skipped` holds the skipped paths of this process
    (each dataloader worker keeps its own count).

    Args:
        ann_file: Manifest with one image path per line (``#`` comments
            allowed). Relative paths in it are relative to the image prefix
            (``data_root`` joined with ``data_prefix['img_path']``). Empty
            (default): scan the image prefix recursively.
        data_root: Root folder; a relative ``ann_file`` is resolved in it.
        data_prefix: ``dict(img_path=...)``, the image folder under
            ``data_root``. Defaults to ``data_root`` itself.
        extensions: Image file endings accepted when scanning, compared
            case-insensitively. Defaults to jpg, jpeg, png, webp.
        imdecode_backend: ``'pillow'`` (default; also detects truncated
            files) or ``'cv2'``.
        backend_args: mmengine file backend arguments.
        pipeline: Transforms applied to the decoded image, e.g.
            ``RandomResizedCrop``, ``RandomFlip``, ``PackInputs``.
        max_refetch: How many replacement images to try before giving up on
            a sample. Defaults to 1000.
        **kwargs: Other :class:`mmengine.dataset.BaseDataset` arguments
            (``test_mode``, ``indices``, ``lazy_init``, ...).

    Example:
        >>> ds = UnlabeledImageDataset(data_root='data/humans',
        ...                            ann_file='curation/manifest.txt',
        ...                            pipeline=[dict(type='PackInputs')])
    """

    METAINFO: dict = dict(classes=None)

    def __init__(self,
                 ann_file: str = '',
                 data_root: Optional[str] = '',
                 data_prefix: Union[str, Dict[str, str]] = '',
                 extensions: Sequence[str] = IMAGE_EXTENSIONS,
                 imdecode_backend: Literal['pillow', 'cv2'] = 'pillow',
                 backend_args: Optional[dict] = None,
                 pipeline: Sequence = (),
                 max_refetch: int = 1000,
                 **kwargs) -> None:
        if imdecode_backend not in ('pillow', 'cv2'):
            raise ValueError(
                f"imdecode_backend must be 'pillow' or 'cv2', got "
                f'{imdecode_backend!r}.')
        if isinstance(data_prefix, str):
            data_prefix = dict(img_path=data_prefix)
        self.extensions = tuple(e.lower() for e in extensions)
        self.imdecode_backend = imdecode_backend
        self.backend_args = backend_args
        self.skipped: List[str] = []
        self._bad: Set[int] = set()
        super().__init__(
            ann_file=ann_file,
            data_root=data_root,
            data_prefix=data_prefix,
            pipeline=list(pipeline),
            max_refetch=max_refetch,
            **kwargs)
        for t in self.pipeline.transforms:
            if isinstance(t, LoadImageFromFile):
                raise ValueError(
                    'UnlabeledImageDataset decodes images itself (so that '
                    'unreadable files are skipped); remove '
                    f'{type(t).__name__} from its pipeline.')

    @property
    def img_prefix(self) -> str:
        """The folder that image paths are relative to."""
        return self.data_prefix.get('img_path', '') or self.data_root or ''

    def load_data_list(self) -> List[dict]:
        """List the images of the manifest or of the image folder."""
        prefix = self.img_prefix
        if self.ann_file:
            paths = read_manifest(self.ann_file)
            source = f'manifest {self.ann_file}'
        else:
            paths = list_images(prefix, self.extensions)
            source = f'folder {prefix}'
        if not paths:
            raise ValueError(
                f'No images found in {source} (extensions '
                f'{self.extensions}). Check data_root / data_prefix / '
                'ann_file.')
        print_log(f'UnlabeledImageDataset: {len(paths)} images from {source}',
                  logger='current')
        return [
            dict(img_path=p if osp.isabs(p) or '://' in p else osp.join(
                prefix, p)) for p in paths
        ]

    def prepare_data(self, idx: int) -> Optional[dict]:
        """Decode image ``idx`` and run the pipeline; ``None`` if the image
        cannot be read (the caller then draws another one)."""
        if idx in self._bad:
            return None
        info = self.get_data_info(idx)
        path = info['img_path']
        try:
            img = read_image(path, self.imdecode_backend, self.backend_args)
        except UnreadableImageError as e:
            self._bad.add(idx)
            self.skipped.append(path)
            print_log(
                f'Skipped unreadable image ({len(self.skipped)} skipped so '
                f'far in this process): {e}',
                logger='current',
                level=30)
            return None
        info.update(img=img, img_shape=img.shape[:2], ori_shape=img.shape[:2])
        return self.pipeline(info)

    def __getitem__(self, idx: int) -> dict:
        if not self._fully_initialized:
            self.full_init()
        data = self.prepare_data(idx)
        tries = 0
        while data is None:
            tries += 1
            if tries > self.max_refetch:
                raise RuntimeError(
                    f'Could not read any image after {self.max_refetch} '
                    f'attempts ({len(self.skipped)} unreadable so far, e.g. '
                    f'{self.skipped[-1:]}); check the image files.')
            idx = (idx + 1) % len(self) if self.test_mode else \
                self._rand_another()
            data = self.prepare_data(idx)
        return data
