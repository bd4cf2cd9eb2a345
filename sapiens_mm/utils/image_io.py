"""Reading images: the one image reader and file-extension list of
sapiens_mm (datasets, inferencers, curation, tools), and the one pixel
budget (:func:`check_image_size`) for every image-sized array a file can
make sapiens_mm allocate (decoded images, video frames, drawing canvases).
"""
import io
import os
import os.path as osp
from typing import (Iterable, Iterator, List, Literal, Optional, Sequence,
                    Tuple)

import numpy as np
from mmengine.fileio import get as get_bytes
from PIL import Image, ImageOps

from .env_numbers import env_positive_number
from .media_names import IMAGE_EXTENSIONS, VIDEO_EXTENSIONS

__all__ = [
    'IMAGE_EXTENSIONS', 'VIDEO_EXTENSIONS', 'UnreadableImageError',
    'ImageTooLargeError', 'MAX_PIXELS_ENV', 'MAX_ASPECT_ENV',
    'DEFAULT_MAX_PIXELS', 'DEFAULT_MAX_ASPECT', 'image_size_limits',
    'check_image_size', 'list_images', 'walk_files', 'read_image',
    'truncation_problem'
]



#: Environment variables that set the image size limits (pixels, long
#: side / short side) of :func:`check_image_size`.
MAX_PIXELS_ENV = 'SAPIENS_MM_MAX_IMAGE_PIXELS'
MAX_ASPECT_ENV = 'SAPIENS_MM_MAX_ASPECT_RATIO'
#: 50 megapixels: above any phone or DSLR photo (a 45 MP full-frame
#: sensor: 8192 x 5464), far below the gigabytes a decoded bomb takes (a
#: 2 KB PNG can declare 4000 x 4000 pixels and more).
DEFAULT_MAX_PIXELS = 50_000_000
#: Long side / short side: panoramas stay well below it, while a 1280 x 1
#: strip would be scaled into a panel hundreds of thousands of pixels wide.
DEFAULT_MAX_ASPECT = 20.0


class UnreadableImageError(OSError):
    """An image file that is missing, corrupt, truncated or not an image."""


class ImageTooLargeError(UnreadableImageError):
    """An image or video frame larger than the configured limits
    (:func:`check_image_size`), refused before it is decoded."""


def image_size_limits() -> Tuple[int, float]:
    """(max pixels, max aspect ratio) from ``$SAPIENS_MM_MAX_IMAGE_PIXELS``
    and ``$SAPIENS_MM_MAX_ASPECT_RATIO`` (defaults
    :data:`DEFAULT_MAX_PIXELS`, :data:`DEFAULT_MAX_ASPECT`).

    Raises:
        ValueError: A variable is set to something other than a positive
            number.
    """
    return (int(env_positive_number(MAX_PIXELS_ENV, DEFAULT_MAX_PIXELS)),
            env_positive_number(MAX_ASPECT_ENV, DEFAULT_MAX_ASPECT))


def check_image_size(width: int,
                     height: int,
                     source: str,
                     max_pixels: Optional[int] = None,
                     max_aspect: Optional[float] = None) -> None:
    """Refuse an image (or video frame, or canvas) size before allocating
    it.

    Decoding allocates ``width x height x 3`` bytes and every later step
    (resizes, overlays, panels) scales with it, while the file can be a few
    bytes: the size is checked from the header the decoder allocates by
    (or from the file that names a canvas size).

    Args:
        width: Width in pixels, as the header declares it.
        height: Height in pixels.
        source: The file (or video / webcam), for the message.
        max_pixels: At most this many pixels (None:
            :func:`image_size_limits`).
        max_aspect: At most this long side / short side (None:
            :func:`image_size_limits`).

    Raises:
        ImageTooLargeError: Over a limit (one line: the size, the limit,
            how to raise it).
    """
    env_pixels, env_aspect = image_size_limits()
    max_pixels = env_pixels if max_pixels is None else int(max_pixels)
    max_aspect = env_aspect if max_aspect is None else float(max_aspect)
    width, height = int(width), int(height)
    if width <= 0 or height <= 0:
        raise UnreadableImageError(
            f'{source} declares an empty image ({width} x {height}).')
    if width * height > max_pixels:
        raise ImageTooLargeError(
            f'{source} is {width} x {height} = {width * height:,} pixels, '
            f'over the limit of {max_pixels:,} (as an image it takes '
            f'{width * height * 3 / 2**30:.1f} GiB and more); scale it down, '
            f'or raise the limit with ${MAX_PIXELS_ENV} if you trust the '
            'file.')
    aspect = max(width, height) / min(width, height)
    if aspect > max_aspect:
        raise ImageTooLargeError(
            f'{source} is {width} x {height}, an aspect ratio of '
            f'{aspect:.0f}:1, over the limit of {max_aspect:g}:1 (no person '
            f'fits in it); crop it, or raise the limit with '
            f'${MAX_ASPECT_ENV}.')


def walk_files(root: str,
               extensions: Sequence[str] = IMAGE_EXTENSIONS,
               exclude: Iterable[str] = ()) -> Iterator[Tuple[str, List[str]]]:
    """Walk ``root`` lazily, one folder at a time, in a fixed order.

    Only one folder's listing is held at a time, so trees of millions of
    files can be walked with bounded memory.

    Args:
        root: Folder to scan (symlinked folders are followed, each real
            folder once).
        extensions: File name endings to accept, compared case-insensitively.
        exclude: Folders (absolute or relative to the working directory)
            whose contents are skipped, e.g. an output folder inside
            ``root``.

    Yields:
        ``(rel_dir, names)``: a folder relative to ``root`` (``'.'`` for
        ``root``, ``/`` separators) and its matching file names, sorted;
        folders in sorted (depth-first) order, folders without a match left
        out.

    Raises:
        FileNotFoundError: ``root`` is not a folder.
    """
    if not osp.isdir(root):
        raise FileNotFoundError(
            f'Image folder not found: {root}. Pass the folder that holds the '
            'images (it is scanned recursively).')
    exts = tuple(e.lower() for e in extensions)
    skip = {osp.realpath(p) for p in exclude}
    seen = {osp.realpath(root)}  # guards against symlink loops
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        keep = []
        for d in sorted(dirnames):
            real = osp.realpath(osp.join(dirpath, d))
            if real not in skip and real not in seen:
                seen.add(real)
                keep.append(d)
        dirnames[:] = keep
        names = sorted(n for n in filenames if n.lower().endswith(exts))
        if names:
            yield osp.relpath(dirpath, root).replace(os.sep, '/'), names


def list_images(root: str,
                extensions: Sequence[str] = IMAGE_EXTENSIONS,
                exclude: Iterable[str] = ()) -> List[str]:
    """Find the images under ``root`` recursively.

    Args:
        root: Folder to scan (symlinked folders are followed).
        extensions: File name endings to accept, compared case-insensitively.
        exclude: Folders (absolute or relative to the working directory)
            whose contents are skipped, e.g. an output folder inside
            ``root``.

    Returns:
        Sorted paths relative to ``root``, with ``/`` separators.

    Raises:
        FileNotFoundError: ``root`` is not a folder.
    """
    return sorted(name if rel_dir == '.' else f'{rel_dir}/{name}'
                  for rel_dir, names in walk_files(root, extensions, exclude)
                  for name in names)


def truncation_problem(content: bytes) -> Optional[str]:
    """Why a JPEG / PNG file is cut short, or None.

    OpenCV decodes a truncated JPEG without an error (the missing rows come
    out grey or black), so the end markers are checked: a JPEG needs an
    end-of-image marker (``FF D9``) after its last start-of-scan (``FF
    DA``; an EXIF thumbnail's own markers come before it), a PNG its
    ``IEND`` chunk. Other formats: None.
    """
    if content[:3] == b'\xff\xd8\xff':
        if content.rfind(b'\xff\xd9') < content.rfind(b'\xff\xda'):
            return ('the JPEG file is truncated (no end-of-image marker '
                    'after its image data)')
    elif content[:8] == b'\x89PNG\r\n\x1a\n' and \
            b'IEND' not in content[-64:]:
        return 'the PNG file is truncated (no IEND chunk)'
    return None


def _decode(content: bytes, source: str, opencv_depth: bool,
            max_pixels: Optional[int],
            max_aspect: Optional[float]) -> np.ndarray:
    """Decode with Pillow after checking the size Pillow will decode at.

    One decoder reads the size and allocates by it: Pillow's image holds
    ``img.size`` pixels and its decoders fill exactly that (a file whose
    headers disagree, e.g. a TIFF with its size tags twice, which Pillow
    reads as one size and libtiff as another, fails to decode instead of
    allocating the other size).
    """
    try:
        img = Image.open(io.BytesIO(content))
    except Image.DecompressionBombError:  # Pillow's own, higher limit
        raise ImageTooLargeError(
            f'{source} declares more pixels than Pillow allows to decode '
            f'({Image.MAX_IMAGE_PIXELS:,}); scale it down.') from None
    except Exception:  # noqa: BLE001 (unidentified / corrupt header)
        raise UnreadableImageError(
            f'cannot decode {source}: unknown or corrupt image header (not '
            'a JPEG, PNG, BMP, TIFF or WebP file)') from ValueError(
                'unknown or corrupt image header')
    with img:
        check_image_size(*img.size, source, max_pixels, max_aspect)
        problem = truncation_problem(content)
        try:
            if problem is not None:
                raise ValueError(problem)
            img = ImageOps.exif_transpose(img)
            if opencv_depth and img.mode.startswith('I;16'):
                # OpenCV keeps the upper byte of 16-bit grey
                grey = (np.asarray(img).astype(np.uint16) >> 8).astype(
                    np.uint8)
                return np.ascontiguousarray(np.repeat(grey[..., None], 3,
                                                      axis=2))
            # convert() decodes the whole file: a truncated file raises
            # OSError here (unless PIL.ImageFile.LOAD_TRUNCATED_IMAGES was
            # turned on; truncation_problem catches JPEG / PNG then too).
            rgb = np.asarray(img.convert('RGB'))
        except Exception as e:  # PIL raises OSError, SyntaxError...
            raise UnreadableImageError(f'cannot decode {source}: {e}') from e
    return np.ascontiguousarray(rgb[..., ::-1])


def read_image(path: str,
               backend: Literal['pillow', 'cv2'] = 'pillow',
               backend_args: Optional[dict] = None,
               max_pixels: Optional[int] = None,
               max_aspect: Optional[float] = None) -> np.ndarray:
    """Read an image as a BGR uint8 array, or raise
    :class:`UnreadableImageError`.

    The image is decoded by Pillow, after its size, as Pillow will decode
    it, passed :func:`check_image_size`: the size checked is the size
    allocated, whatever the file's headers say elsewhere.

    Args:
        path: File path (or any URI mmengine's file backends accept).
        backend: How pixels become 8-bit BGR: ``'pillow'`` (default) as
            Pillow's ``convert('RGB')``, ``'cv2'`` as OpenCV's
            ``IMREAD_COLOR`` (16-bit grey keeps its upper byte), so that
            results equal ``cv2.imread``'s. Both apply the EXIF
            orientation (as OpenCV does) and give the same pixels for 8-bit
            JPEG, PNG, BMP, TIFF and WebP files; both reject truncated
            files (JPEG / PNG also through :func:`truncation_problem`).
        backend_args: mmengine file backend arguments.
        max_pixels: Refuse images with more pixels, from the header, before
            decoding (None: ``$SAPIENS_MM_MAX_IMAGE_PIXELS``, else 50 MP;
            see :func:`check_image_size`).
        max_aspect: Refuse images whose long side / short side is larger
            (None: ``$SAPIENS_MM_MAX_ASPECT_RATIO``, else 20).

    Returns:
        (H, W, 3) uint8 BGR image. Grey images are expanded to 3 channels and
        an alpha channel is dropped.

    Raises:
        ImageTooLargeError: Over the size limits (nothing decoded).
        UnreadableImageError: Missing, empty, corrupt, truncated or not an
            image.
    """
    if backend not in ('pillow', 'cv2'):
        raise ValueError("backend must be 'pillow' or 'cv2', got "
                         f'{backend!r}.')
    try:
        content = get_bytes(path, backend_args=backend_args)
    except Exception as e:  # missing file, permission, remote backend error
        raise UnreadableImageError(f'cannot read {path}: {e}') from e
    if not content:
        raise UnreadableImageError(f'{path} is an empty file')
    img = _decode(content, path, backend == 'cv2', max_pixels, max_aspect)
    if img.ndim != 3 or img.shape[0] == 0 or img.shape[1] == 0:
        raise UnreadableImageError(
            f'{path} decoded to an empty image {img.shape}')
    return img
