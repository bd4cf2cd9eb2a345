"""Metadata of exported models (``.onnx``, ``.pt2``): its names and its
reader.

What a consumer needs to pre- and post-process an exported model (task,
input size, mean / std, channel order, output meaning and stride, keypoint /
class names, skeleton, heatmap codec, the config as data) is stored with the
file: in the ONNX ``metadata_props`` (one JSON value per key) and, for
``.pt2``, inside the archive (``extra/sapiens_mm.json``) and in a JSON
sidecar ``<name>.pt2.json``. :func:`read_metadata` reads either as data.

This module depends on no other part of sapiens_mm but
:mod:`~sapiens_mm.deploy.safe_load`, so the
inferencers and the runtime can read metadata without the exporter.
"""
import json
import os.path as osp
import zipfile

from .safe_load import UnsafeModelError

__all__ = [
    'OUTPUT_NAMES', 'INPUT_NAME', 'METADATA_VERSION', 'PT2_EXTRA',
    'read_metadata', 'check_metadata'
]

#: Name of the graph output of each task.
OUTPUT_NAMES = dict(pose='heatmaps',
                    seg='logits',
                    depth='depth',
                    normal='normal',
                    pointmap='pointmap',
                    albedo='albedo',
                    matting='matting')
INPUT_NAME = 'images'
#: Version of the metadata layout. 2: the config is stored as data
#: (:func:`~sapiens_mm.deploy.safe_load.config_to_data`); files of version 1
#: store it as Python text, which is refused (never executed).
METADATA_VERSION = 2
#: Name of the metadata entry inside a ``.pt2`` archive (``extra/``).
PT2_EXTRA = 'sapiens_mm.json'


def read_metadata(path: str) -> dict:
    """The export metadata of an ``.onnx`` or ``.pt2`` file, read as data.

    Nothing in the file is executed: the ONNX protobuf and the archive's
    JSON entry are parsed, and the stored config stays data (rebuild it with
    :func:`~sapiens_mm.deploy.safe_load.config_from_data`).

    Raises:
        FileNotFoundError: No such file.
        ValueError: Not an exported Sapiens model (unreadable file, no
            metadata, or metadata values of the wrong kind).
    """
    path = str(path)
    if not osp.isfile(path):
        raise FileNotFoundError(f'Exported model not found: {path}')
    if path.endswith('.onnx'):
        import onnx
        try:
            model = onnx.load(path, load_external_data=False)
        except Exception as e:  # protobuf DecodeError and friends
            raise ValueError(
                f'{path} is not a readable ONNX model ({type(e).__name__}: '
                f'{str(e).splitlines()[0] if str(e) else "no details"}); '
                'export it with tools/deploy/export.py.') from None
        raw = {p.key: p.value for p in model.metadata_props}
        try:
            meta = {k: json.loads(v) for k, v in raw.items()}
        except json.JSONDecodeError:
            meta = {}
    elif path.endswith('.pt2'):
        meta = {}
        try:
            with zipfile.ZipFile(path) as archive:
                names = [
                    n for n in archive.namelist()
                    if n.endswith(f'extra/{PT2_EXTRA}')
                ]
                if names:
                    meta = json.loads(archive.read(names[0]))
        except (zipfile.BadZipFile, json.JSONDecodeError, OSError):
            raise ValueError(
                f'{path} is not a torch.export archive written by '
                'tools/deploy/export.py.') from None
    else:
        raise ValueError(f'{path}: expected an exported .onnx or .pt2 file.')
    if not isinstance(meta, dict) or \
            meta.get('format') != 'sapiens_mm.export':
        raise ValueError(
            f'{path} has no sapiens_mm export metadata: export it with '
            'tools/deploy/export.py.')
    check_metadata(meta, path)
    return meta


def check_metadata(meta: dict, path: str) -> None:
    """The fields the runtime uses have the kind of value they should."""
    size = meta.get('input_size')
    problems = []
    if meta.get('task') not in OUTPUT_NAMES:
        problems.append(f'task={meta.get("task")!r}')
    if not (isinstance(size, list) and len(size) == 2 and all(
            isinstance(v, int) and v > 0 for v in size)):
        problems.append(f'input_size={size!r}')
    if not isinstance(meta.get('input_name', INPUT_NAME), str):
        problems.append(f'input_name={meta.get("input_name")!r}')
    if problems:
        raise UnsafeModelError(
            f'{path}: invalid export metadata ({", ".join(problems)}); '
            're-export the model with tools/deploy/export.py.')
