"""Shared pieces of the COCO annotation-file tests."""
import json
from pathlib import Path

#: The shipped dataset base configs.
DATASET_CONFIGS = (Path(__file__).resolve().parents[2] / 'configs' /
                   '_base_' / 'datasets')

#: Keypoint counts of the COCO-WholeBody fields besides the 17 body
#: ``keypoints`` (COCO-WholeBody v1.0 format).
WHOLEBODY_EXTRA = dict(foot_kpts=6, face_kpts=68, lefthand_kpts=21,
                       righthand_kpts=21)


def write_json(folder, data, name='ann.json'):
    """Write ``data`` to ``folder/name`` (NaN / inf as Python's json writes
    them, as a user's tool would) and return the path as a string."""
    path = Path(folder) / name
    path.write_text(json.dumps(data))
    return str(path)
