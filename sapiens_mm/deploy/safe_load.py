"""Reading exported models (``.onnx`` / ``.pt2``) without running code from
them.

An exported model is a file users download. Two things in such a file could
run code when it is opened naively:

* the model config stored in its metadata. Version 1 of the metadata stored
  the config as Python text, and ``Config.fromstring(text, '.py')`` executes
  it. The config is now stored as pure data and rebuilt executing nothing
  (:func:`config_to_data` / :func:`config_from_data`, from
  :mod:`sapiens_mm.checkpoint.config_data`, which checkpoints use too).
* the weights of a ``.pt2`` archive. torch's archive loader unpickles a
  weight or constant flagged ``use_pickle`` (and legacy ``*.pt`` weight
  files, and "opaque" constants) with full pickle, i.e. it can run any
  ``__reduce__``. :func:`check_pt2_archive` reads the archive's zip
  directory and JSON configs first and refuses such entries before torch
  touches the file; the sample inputs (a ``torch.save`` file torch would
  retry with ``weights_only=False`` on failure) must load with
  ``weights_only=True``.
"""
import io
import json
import re
import zipfile

from sapiens_mm.checkpoint.config_data import (UnsafeModelError,
                                               config_from_data,
                                               config_to_data)

__all__ = [
    'UnsafeModelError', 'config_to_data', 'config_from_data',
    'check_pt2_archive'
]

# --------------------------------------------------------------------- pt2
#: Entries (relative to the archive root) that torch reads as data.
_PT2_DATA = re.compile(
    r'^(archive_format|archive_version|byteorder|\.data/version|'
    r'\.data/serialization_id|models/[^/]+\.json|extra/[^/]+|'
    r'data/weights/weight_\d+|data/constants/tensor_\d+|'
    r'data/weights/[^/]+_weights_config\.json|'
    r'data/constants/[^/]+_constants_config\.json)$')
_PT2_SAMPLE_INPUTS = re.compile(r'^data/sample_inputs/[^/]+\.pt$')


def check_pt2_archive(path: str) -> None:
    """Refuse a ``.pt2`` archive that would make ``torch.export.load``
    unpickle anything.

    Reads only the zip directory, the payload configs (JSON) and the sample
    inputs (with ``torch.load(weights_only=True)``); nothing is executed.

    Args:
        path: A ``.pt2`` file.

    Raises:
        UnsafeModelError: Not a zip archive, an entry torch would unpickle
            (a weight or constant with ``use_pickle``, a legacy ``*.pt``
            weights / constants file, a custom or opaque object), sample
            inputs that need more than ``weights_only=True``, or any entry
            this check does not know.
    """
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as e:
        raise UnsafeModelError(
            f'{path} is not a torch.export (.pt2) archive ({e}).') from None
    with archive:
        names = archive.namelist()
        roots = {n.split('/', 1)[0] for n in names}
        if len(roots) != 1 or any('/' not in n for n in names):
            raise UnsafeModelError(
                f'{path} is not a torch.export (.pt2) archive: its entries '
                'do not share one root folder.')
        for name in names:
            rel = name.split('/', 1)[1]
            if rel == '' or rel.endswith('/'):
                continue
            if _PT2_SAMPLE_INPUTS.match(rel):
                _check_sample_inputs(path, name, archive.read(name))
                continue
            if not _PT2_DATA.match(rel):
                raise UnsafeModelError(
                    f'Refused {path}: its entry {rel!r} is not plain data '
                    'that torch.export.load reads safely (pickled weights, '
                    'objects or compiled code). sapiens_mm writes no such '
                    'entry; re-export the model with tools/deploy/export.py.')
            if rel.endswith('_config.json'):
                _check_payload_config(path, rel, archive.read(name))


def _check_payload_config(path: str, rel: str, raw: bytes) -> None:
    try:
        config = json.loads(raw).get('config')
        entries = dict(config)
    except (ValueError, AttributeError, TypeError):
        raise UnsafeModelError(
            f'Refused {path}: {rel} is not a valid payload config.') from None
    for fqn, meta in entries.items():
        if not isinstance(meta, dict) or meta.get('use_pickle', False) or \
                not re.match(r'^(weight|tensor)_\d+$',
                             str(meta.get('path_name'))):
            raise UnsafeModelError(
                f'Refused {path}: {fqn!r} in {rel} is stored as a pickle '
                '(use_pickle), which torch.export.load unpickles with '
                'weights_only=False and which can run arbitrary code. '
                'sapiens_mm never exports pickled weights; re-export the '
                'model with tools/deploy/export.py.')


def _check_sample_inputs(path: str, name: str, raw: bytes) -> None:
    import torch
    try:
        torch.load(io.BytesIO(raw), weights_only=True)
    except Exception as e:  # noqa: BLE001 (any failure means: refuse)
        raise UnsafeModelError(
            f'Refused {path}: its sample inputs ({name}) need more than '
            'tensors to load (torch.export.load would retry them with '
            f'weights_only=False): {str(e).splitlines()[0]}') from None
