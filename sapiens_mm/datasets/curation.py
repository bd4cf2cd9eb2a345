"""Keep the images that show a person: the Sapiens pretraining data filter.

The Sapiens paper builds Humans-300M by running a person detector over a
large image collection and keeping the images with a detection whose score
is above 0.9 and whose bounding box is larger than 300 px. This module does
the same over a folder of images and writes a manifest that
:class:`sapiens_mm.datasets.UnlabeledImageDataset` reads (``ann_file``).

The detectors are sapiens_mm's person detectors
(:mod:`sapiens_mm.detection.person_detector`), each with
defaults for the two thresholds:

* :class:`MMDetPersonDetector`: any mmdet detector (config + checkpoint),
  e.g. the RTMDet person detector the Sapiens demos use. ``score`` is the
  detector's class score in [0, 1]; the paper defaults apply (0.9, 300 px).
* :class:`OpenCVFaceDetector` (the default, no download): OpenCV's
  frontal-face cascade. It finds people by their frontal face, so it misses
  people seen from behind or far away; use it to get going, and an mmdet
  person detector for real curation. Its ``score`` is the number of merged
  cascade windows (not a probability) and its box the face box, hence its
  own defaults: at least 15 votes and a face at least 64 px wide.

At scale, :func:`sapiens_mm.engine.sharded.curate_images_sharded` splits
the folder across the processes of a ``torchrun`` / SLURM job and writes the
same ``manifest.txt``.

Resuming: every decision is appended to ``decisions.jsonl`` (with the
detections themselves) as soon as it is made. A second run reads it, runs
the detector only on images it has not seen, and re-applies the current
thresholds to the stored detections, so changing ``score_thr`` or
``min_box_size`` does not need a new detection pass.
"""
import json
import os
import os.path as osp
from dataclasses import asdict, dataclass, field
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from mmengine.logging import print_log
from tqdm import tqdm

from sapiens_mm.detection import MMDetPersonDetector, OpenCVFaceDetector
from sapiens_mm.utils.image_io import (
    IMAGE_EXTENSIONS,
    UnreadableImageError,
    list_images,
    read_image,
)

__all__ = [
    'Detection', 'detect', 'CurationReport', 'curate_images',
    'curation_settings', 'is_kept', 'decide', 'write_curation_outputs',
    'MANIFEST_NAME', 'DECISIONS_NAME', 'REPORT_NAME', 'META_NAME'
]

MANIFEST_NAME = 'manifest.txt'
DECISIONS_NAME = 'decisions.jsonl'
REPORT_NAME = 'report.json'
META_NAME = 'meta.json'
#: Detections stored per image (highest scores first).
MAX_STORED_DETECTIONS = 20


class Detection(NamedTuple):
    """A person (or face) detection in original image pixels.

    Attributes:
        bbox: (x1, y1, x2, y2).
        score: Detector-specific confidence (see the detector).
    """
    bbox: Tuple[float, float, float, float]
    score: float

    @property
    def size(self) -> float:
        """Box size used by the ``min_box_size`` filter: the longer side.

        The paper asks for "bounding box dimensions exceeding 300 pixels";
        we read that as the longer side of the box.
        """
        x1, y1, x2, y2 = self.bbox
        return max(x2 - x1, y2 - y1)


def detect(detector: Callable, img) -> List[Detection]:
    """A detector's detections of one image, highest score first.

    Args:
        detector: A person detector (any callable ``(H, W, 3) uint8 BGR ->
            (boxes (N, 4) xyxy, scores (N,))``).
        img: The image.
    """
    boxes, scores = detector(img)
    dets = [
        Detection(tuple(float(v) for v in box), float(score))
        for box, score in zip(boxes, scores)
    ]
    return sorted(dets, key=lambda d: -d.score)


@dataclass
class CurationReport:
    """Outcome of :func:`curate_images` over all images of the folder.

    Attributes:
        total: Images found.
        kept / dropped / unreadable: Decisions under the current thresholds.
        detected: Images the detector ran on in this call.
        reused: Images decided by an earlier run (detector not run again).
        score_thr / min_box_size: Thresholds applied.
        detector: The detector's settings.
        manifest: Path of the manifest of kept images.
    """
    total: int = 0
    kept: int = 0
    dropped: int = 0
    unreadable: int = 0
    detected: int = 0
    reused: int = 0
    score_thr: float = 0.0
    min_box_size: float = 0.0
    detector: dict = field(default_factory=dict)
    manifest: str = ''

    def summary(self) -> str:
        return (f'{self.total} images: {self.kept} kept, {self.dropped} '
                f'dropped, {self.unreadable} unreadable ({self.detected} '
                f'detected now, {self.reused} decided by a previous run); '
                f'manifest: {self.manifest}')


def is_kept(dets: Sequence[Sequence[float]], score_thr: float,
            min_box_size: float) -> bool:
    """Whether stored detections (``[x1, y1, x2, y2, score]``) keep their
    image: one with ``score >= score_thr`` and a box of at least
    ``min_box_size`` pixels."""
    return any(
        d[4] >= score_thr and Detection(tuple(d[:4]), d[4]).size >=
        min_box_size for d in dets)


def curation_settings(
        detector: Optional[Callable], score_thr: Optional[float],
        min_box_size: Optional[float]) -> Tuple[Callable, float, float, dict]:
    """The detector (default: the OpenCV face detector), the thresholds
    (default: the detector's) and the detector's description."""
    detector = detector if detector is not None else OpenCVFaceDetector()
    if score_thr is None:
        score_thr = float(getattr(detector, 'default_score_thr',
                                  MMDetPersonDetector.default_score_thr))
    if min_box_size is None:
        min_box_size = float(
            getattr(detector, 'default_min_box_size',
                    MMDetPersonDetector.default_min_box_size))
    desc = detector.describe() if hasattr(detector, 'describe') else dict(
        name=type(detector).__name__)
    return detector, score_thr, min_box_size, desc


def _read_decisions(path: str) -> Dict[str, dict]:
    decisions: Dict[str, dict] = {}
    if not osp.isfile(path):
        return decisions
    with open(path, encoding='utf-8') as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
                decisions[rec['path']] = rec
            except (ValueError, KeyError):
                # A line cut by an interrupted run: that image is redone.
                print_log(f'{path}:{n}: ignoring an incomplete record.',
                          logger='current', level=30)
    return decisions


def decide(detector: Callable, path: str) -> dict:
    """Run the detector on one image: ``status='decided'`` with its
    ``detections`` (``[x1, y1, x2, y2, score]``, the best
    :data:`MAX_STORED_DETECTIONS`), ``height`` and ``width``; or
    ``status='unreadable'`` with the ``error``."""
    try:
        img = read_image(path)
    except UnreadableImageError as e:
        return dict(status='unreadable', error=str(e))
    stored = [[round(v, 2) for v in d.bbox] + [float(d.score)]
              for d in detect(detector, img)[:MAX_STORED_DETECTIONS]]
    return dict(status='decided', detections=stored,
                height=int(img.shape[0]), width=int(img.shape[1]))


def curate_images(root: str,
                  out_dir: Optional[str] = None,
                  detector: Optional[Callable] = None,
                  score_thr: Optional[float] = None,
                  min_box_size: Optional[float] = None,
                  extensions: Sequence[str] = IMAGE_EXTENSIONS,
                  restart: bool = False,
                  progress: bool = True) -> CurationReport:
    """Run a person detector over ``root`` and write the kept-image manifest.

    Args:
        root: Image folder, scanned recursively.
        out_dir: Where ``manifest.txt`` (kept images, paths relative to
            ``root``), ``decisions.jsonl``, ``report.json`` and ``meta.json``
            go. Defaults to ``<root>/curation`` (not scanned).
        detector: A person detector (any callable ``(H, W, 3) uint8 BGR ->
            (boxes, scores)`` with a ``describe()`` method, see
            :mod:`~sapiens_mm.detection.person_detector`);
            defaults to its ``OpenCVFaceDetector``.
        score_thr: Keep an image if a detection has ``score >= score_thr``
            and ...
        min_box_size: ... a box whose longer side is ``>= min_box_size``
            pixels. Both default to the detector's defaults
            (``default_score_thr`` / ``default_min_box_size``).
        extensions: Image file endings.
        restart: Forget earlier decisions and detect every image again.
        progress: Show a tqdm progress bar.

    Returns:
        The :class:`CurationReport` (also written to ``report.json``).

    Raises:
        ValueError: ``out_dir`` holds decisions of a different detector
            (use another ``out_dir`` or ``restart=True``).
    """
    detector, score_thr, min_box_size, desc = curation_settings(
        detector, score_thr, min_box_size)
    out_dir = out_dir or osp.join(root, 'curation')
    os.makedirs(out_dir, exist_ok=True)
    dec_path = osp.join(out_dir, DECISIONS_NAME)
    meta_path = osp.join(out_dir, META_NAME)

    if restart and osp.exists(dec_path):
        os.remove(dec_path)
    decisions = _read_decisions(dec_path)
    if decisions and osp.isfile(meta_path):
        with open(meta_path, encoding='utf-8') as f:
            old = json.load(f).get('detector')
        if old != desc:
            raise ValueError(
                f'{out_dir} holds decisions made with detector {old}, not '
                f'{desc}. Use another output folder, or restart to detect '
                'every image again (--restart).')
    with open(meta_path, 'w', encoding='utf-8') as f:
        json.dump(dict(detector=desc, root=osp.abspath(root)), f, indent=2)

    paths = list_images(root, extensions, exclude=[out_dir])
    todo = [p for p in paths if p not in decisions]
    report = CurationReport(
        total=len(paths), reused=len(paths) - len(todo),
        score_thr=score_thr, min_box_size=min_box_size, detector=desc,
        manifest=osp.join(out_dir, MANIFEST_NAME))
    print_log(f'Curating {len(paths)} images under {root}: {len(todo)} to '
              f'detect, {report.reused} decided by a previous run.',
              logger='current')

    if osp.isfile(dec_path) and osp.getsize(dec_path):
        with open(dec_path, 'rb') as f:
            f.seek(-1, os.SEEK_END)
            cut = f.read(1) != b'\n'
        if cut:  # end the line a crash left incomplete
            with open(dec_path, 'a', encoding='utf-8') as out:
                out.write('\n')
    with open(dec_path, 'a', encoding='utf-8') as out:
        bar = tqdm(todo, desc='curate', unit='img', disable=not progress,
                   dynamic_ncols=True)
        new_kept = new_unreadable = 0
        for rel in bar:
            rec = dict(path=rel, **decide(detector, osp.join(root, rel)))
            out.write(json.dumps(rec) + '\n')
            out.flush()
            decisions[rel] = rec
            report.detected += 1
            if rec['status'] == 'unreadable':
                new_unreadable += 1
            elif is_kept(rec['detections'], score_thr, min_box_size):
                new_kept += 1
            bar.set_postfix(kept=new_kept, unreadable=new_unreadable,
                            refresh=False)

    kept = []
    for rel in paths:
        rec = decisions[rel]
        if rec['status'] == 'unreadable':
            report.unreadable += 1
        elif is_kept(rec.get('detections', []), score_thr, min_box_size):
            report.kept += 1
            kept.append(rel)
        else:
            report.dropped += 1
    write_curation_outputs(report, kept, desc, out_dir)
    return report


def write_curation_outputs(report: CurationReport, kept: Sequence[str],
                           desc: dict, out_dir: str) -> None:
    """Write ``manifest.txt`` (the kept paths, relative to the scanned
    folder) and ``report.json``."""
    with open(report.manifest, 'w', encoding='utf-8') as f:
        f.write(f'# sapiens_mm curation manifest: {len(kept)} images kept by '
                f'{desc.get("name")} (score >= {report.score_thr}, box >= '
                f'{report.min_box_size} px); paths relative to the scanned '
                'folder\n')
        f.writelines(p + '\n' for p in kept)
    with open(osp.join(out_dir, REPORT_NAME), 'w', encoding='utf-8') as f:
        json.dump(asdict(report), f, indent=2)
    print_log(report.summary(), logger='current')

