"""The model registry: one card per released model, read from metafiles.

The facts about every released model (name, aliases, config, Hub file,
task, size, Sapiens version, licence) live in one place: OpenMMLab metafiles,
``configs/**/metafile.yml``, listed by ``model-index.yml``. A source checkout
has them at its root; an installed package ships them as
``sapiens_mm/.mim/model-index.yml`` and ``sapiens_mm/.mim/configs/``
(OpenMMLab's ``.mim`` convention, which ``mim download`` reads too).

A model entry looks like this::

    - Name: sapiens2-pose-0.4b
      In Collection: Sapiens2
      Alias:
        - sapiens2_0.4b_pose
      Config: configs/sapiens2/pose/sapiens2_0.4b-goliath-1024x768.py
      Metadata:
        Task: pose
        Size: 0.4b
        Version: 2
        License: Sapiens2 License
        Format: safetensors
        Training Data: goliath
        File Pattern: sapiens2_0.4b_pose.safetensors
        Publisher: facebook
      Weights: https://huggingface.co/facebook/sapiens2-pose-0.4b/resolve/main/sapiens2_0.4b_pose.safetensors

``Weights`` names the Hub repository, revision and file. File names drift
between a repository's variants, so the file actually downloaded is the one
of the repository's listing that matches ``File Pattern`` (the ``Weights``
name when present). A download is checked against the hash and size the
Hub gives for the file (its ETag and listing; see :mod:`.hub`): the index
itself holds no hash or size.

More indices (a private mirror, a fine-tuned model) are added with
:func:`add_model_index` or the ``SAPIENS_MM_MODEL_INDEX`` environment
variable (paths separated by ``os.pathsep``); a later entry of the same name
replaces an earlier one.
"""
import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union
from urllib.parse import unquote

import yaml

from sapiens_mm.utils.commands import python_command

__all__ = [
    'ModelCard', 'UnknownModelError', 'MODEL_INDEX_ENV', 'index_root',
    'model_index_path', 'load_model_index', 'add_model_index', 'model_cards',
    'find_card', 'lookup_card', 'close_names', 'unknown_model_error'
]

MODEL_INDEX_ENV = 'SAPIENS_MM_MODEL_INDEX'

#: ``https://<host>/<org>/<repo>/resolve/<revision>/<path in repo>``
_WEIGHTS_URL = re.compile(r'^https?://[^/]+/(?P<repo>[^/]+/[^/]+)/resolve/'
                          r'(?P<revision>[^/]+)/(?P<path>.+)$')


class UnknownModelError(ValueError):
    """No registry entry has that name, alias or repository id."""


@dataclass(frozen=True)
class ModelCard:
    """One released model, as its metafile entry describes it.

    Attributes:
        name: Registry name (``'sapiens2-pose-0.4b'``).
        aliases: Other names that select it (file stems, short names).
        collection: ``'Sapiens'``, ``'Sapiens2'`` or ``'RTMDet'``.
        config: Absolute path of the shipped config that builds it, or None
            (no config ships: pretraining backbones without a task,
            matting).
        task: ``'pose'``, ``'seg'``, ``'depth'``, ``'normal'``,
            ``'pointmap'``, ``'pretrain'``, ``'matting'`` or
            ``'detection'``.
        size: ``'0.3b'`` ... ``'5b'``; None for the detector.
        version: Sapiens version (1 or 2); None for the detector.
        license: Licence name (``'CC-BY-NC-4.0'``, ``'Sapiens2 License'``).
        format: ``'pth'``, ``'safetensors'``, or a Sapiens-lite compiled
            graph: ``'torchscript'`` / ``'bfloat16'`` (``.pt2``).
        dataset: Training data (``'goliath'``, ``'dome29'``, ...) or None.
        weights: The ``Weights`` URL.
        repo_id: Hub repository (``'facebook/sapiens2-pose-0.4b'``).
        revision: Hub revision of ``weights`` (``'main'``).
        filename: Path of the file in the repository, as ``weights`` names
            it.
        pattern: ``fnmatch`` pattern over the repository's file names that
            selects the file when ``filename`` is absent.
        publisher: Who uploaded it (``'facebook'``, ``'noahcao'``).
        third_party: Not an upload of the model's authors.
        source: The metafile it came from.
    """
    name: str
    aliases: Tuple[str, ...]
    collection: str
    config: Optional[Path]
    task: str
    size: Optional[str]
    version: Optional[int]
    license: str
    format: str
    dataset: Optional[str]
    weights: str
    repo_id: str
    revision: str
    filename: str
    pattern: str
    publisher: str
    third_party: bool = False
    source: Optional[Path] = None

    @property
    def page(self) -> str:
        """The Hub page of its repository (licence, gating)."""
        host = self.weights.split('/', 3)[:3]
        return '/'.join(host + [self.repo_id])

    @property
    def runnable(self) -> bool:
        """Whether sapiens_mm builds and runs it (a task model with a
        shipped config, in a weights format, not a compiled graph)."""
        return self.config is not None and self.format in (
            'pth', 'safetensors') and self.task not in ('pretrain',
                                                          'detection')


def index_root() -> Path:
    """The folder holding ``model-index.yml`` and ``configs/`` (the shipped
    configs and metafiles): the package's ``.mim`` folder when installed
    (OpenMMLab's convention), the checkout otherwise (a source checkout and
    an editable install of it).

    Raises:
        FileNotFoundError: Neither has them.
    """
    package = Path(__file__).resolve().parents[1]
    for root in (package / '.mim', package.parent):
        if (root / 'model-index.yml').is_file() and \
                (root / 'configs' / '_base_').is_dir():
            return root
    raise FileNotFoundError(
        f'The sapiens_mm configs and model index were found neither in the '
        f'package ({package / ".mim"}) nor in a checkout ({package.parent}).'
        ' Reinstall sapiens_mm (pip install .) or pass a config file '
        'together with the checkpoint.')


def model_index_path() -> Path:
    """The shipped ``model-index.yml``."""
    return index_root() / 'model-index.yml'


def _read_yaml(path: Path) -> dict:
    with open(path, encoding='utf-8') as f:
        data = yaml.safe_load(f)
    if not isinstance(data, dict):
        raise ValueError(f'{path} is not a metafile / model index (a YAML '
                         'mapping with Import or Models).')
    return data


def _card(entry: dict, root: Path, source: Path) -> ModelCard:
    where = f'{source}: model {entry.get("Name", "?")!r}'
    try:
        name, weights = str(entry['Name']), str(entry['Weights'])
        meta = dict(entry['Metadata'])
        task, license_ = str(meta['Task']), str(meta['License'])
    except (KeyError, TypeError) as e:
        raise ValueError(f'{where} lacks {e}; every model needs Name, '
                         'Weights and Metadata with Task and License.'
                         ) from None
    m = _WEIGHTS_URL.match(weights)
    if m is None:
        raise ValueError(f'{where}: Weights {weights!r} is not a Hub file '
                         'URL (https://<host>/<org>/<repo>/resolve/<rev>/'
                         '<file>).')
    filename = unquote(m.group('path'))
    config = entry.get('Config')
    version = meta.get('Version')
    size = meta.get('Size')
    return ModelCard(
        name=name,
        aliases=tuple(str(a) for a in entry.get('Alias') or ()),
        collection=str(entry.get('In Collection', '')),
        config=(root / config).resolve() if config else None,
        task=task,
        size=None if size is None else str(size),
        version=None if version is None else int(version),
        license=license_,
        format=str(meta.get('Format', Path(filename).suffix.lstrip('.'))),
        dataset=meta.get('Training Data'),
        weights=weights,
        repo_id=m.group('repo'),
        revision=unquote(m.group('revision')),
        filename=filename,
        pattern=str(meta.get('File Pattern', Path(filename).name)),
        publisher=str(meta.get('Publisher', m.group('repo').split('/')[0])),
        third_party=bool(meta.get('Third Party', False)),
        source=source)


def load_model_index(path: Union[str, Path]) -> List[ModelCard]:
    """The cards of a ``model-index.yml`` (its ``Import`` metafiles, or its
    own ``Models``) or of one metafile.

    Paths inside (``Import``, ``Config``) are relative to the index's
    folder.

    Raises:
        FileNotFoundError: The index or a metafile it imports is missing.
        ValueError: A malformed entry (the message names it).
    """
    path = Path(path).resolve()
    root = path.parent
    data = _read_yaml(path)
    cards = []
    for entry in data.get('Models') or ():
        cards.append(_card(entry, root, path))
    for item in data.get('Import') or ():
        metafile = root / item
        for entry in _read_yaml(metafile).get('Models') or ():
            cards.append(_card(entry, root, metafile))
    return cards


_EXTRA_INDICES: List[Path] = []
_CACHE: Dict[Tuple, Dict[str, ModelCard]] = {}


def add_model_index(path: Union[str, Path]) -> None:
    """Add the models of another index or metafile to the registry (its
    entries replace shipped ones of the same name)."""
    path = Path(path).resolve()
    if not path.is_file():
        raise FileNotFoundError(f'Model index not found: {path}')
    if path not in _EXTRA_INDICES:
        _EXTRA_INDICES.append(path)


def _indices() -> Tuple[Path, ...]:
    env = [
        Path(p).resolve()
        for p in os.environ.get(MODEL_INDEX_ENV, '').split(os.pathsep) if p
    ]
    return (model_index_path(), *_EXTRA_INDICES, *env)


def model_cards() -> Dict[str, ModelCard]:
    """Every registered model, ``{name: card}``, in index order."""
    indices = _indices()
    key = tuple((p, p.stat().st_mtime_ns if p.is_file() else None)
                for p in indices)
    if key not in _CACHE:
        cards: Dict[str, ModelCard] = {}
        for path in indices:
            if not path.is_file():
                raise FileNotFoundError(
                    f'Model index not found: {path} (check '
                    f'{MODEL_INDEX_ENV}).')
            for card in load_model_index(path):
                cards.pop(card.name, None)
                cards[card.name] = card
        _CACHE.clear()
        _CACHE[key] = cards
    return _CACHE[key]


def _keys(card: ModelCard) -> Tuple[str, ...]:
    return (card.name, *card.aliases)


def lookup_card(query: str) -> Optional[ModelCard]:
    """The card named ``query`` (its name or an alias, case-insensitive,
    or its repository id), or None.

    A repository id selects the model whose ``Weights`` live there; when
    several do (a third-party repository holding several models), it
    selects none.
    """
    text = str(query).strip()
    low = text.lower()
    cards = model_cards()
    for card in reversed(list(cards.values())):
        if low in (k.lower() for k in _keys(card)):
            return card
    in_repo = [c for c in cards.values() if c.repo_id.lower() == low]
    return in_repo[0] if len(in_repo) == 1 else None


def close_names(query: str, n: int = 3) -> List[str]:
    """Registry names (and aliases) closest to ``query``."""
    names = [k for c in model_cards().values() for k in _keys(c)]
    by_low = {k.lower(): k for k in names}
    found = difflib.get_close_matches(str(query).lower(), list(by_low), n=n,
                                      cutoff=0.5)
    return [by_low[k] for k in found]


def find_card(query: str) -> ModelCard:
    """The card of ``query`` (see :func:`lookup_card`).

    Raises:
        UnknownModelError: No such model; the message suggests the closest
            names.
    """
    card = lookup_card(query)
    if card is not None:
        return card
    low = str(query).strip().lower()
    in_repo = [c.name for c in model_cards().values()
               if c.repo_id.lower() == low]
    if in_repo:
        raise UnknownModelError(
            f'Repository {query} holds several models ({", ".join(in_repo)})'
            '; name one of them.')
    raise unknown_model_error(f'Unknown model {query!r}', query)


def unknown_model_error(what: str, query: str) -> UnknownModelError:
    """The error for a name that is no released model: ``what`` (what was
    not found), the closest registry names to ``query``, and the command
    that lists every model (runnable as printed)."""
    close = close_names(query)
    return UnknownModelError(
        what + (f'; did you mean {", ".join(close)}?' if close else '.')
        + f' `{python_command()} tools/download.py --list` lists every '
        'model.')
