"""Model configs as plain data: stored in files users hand around
(checkpoints, exported models) and rebuilt without running code.

A config stored as Python text is executed when read back
(``Config.fromstring(text, '.py')``), so a downloaded file could run any
code through it. :func:`config_to_data` stores a config as pure data (JSON
objects, lists, strings, numbers, booleans, null; tuples as
``{"__tuple__": [...]}``) and :func:`config_from_data` rebuilds it with
``Config(dict)``, which executes nothing. Values that would make OpenMMLab
import or run code while *building* from the config are refused too:

* ``custom_imports`` (``import_modules_from_strings``), ``_base_`` and
  ``from_file`` (mmpose executes the named Python file);
* a scope other than the packages sapiens_mm registers into (mmengine,
  mmpretrain, mmpose, mmseg, mmdet) in ``_scope_`` or ``default_scope``,
  or as the prefix of a type name: mmengine imports ``<scope>.registry``
  for a scope (``Registry.switch_scope_and_registry``, ``Registry.get``);
* a registry key (``type``, the optimizer wrapper's ``constructor``, a
  ``runner_type``) that is not a class name registered in an OpenMMLab
  registry, or whose name is also a module Python can import: when the
  registry that builds it does not know the name, ``Registry.get`` falls
  back to importing it (``get_object_from_string``, e.g. ``os.system``);
* storage other than local files and http(s): a ``scheme://`` path
  (``s3://``, ``petrel://``, ``pavi://``...) or ``backend_args`` /
  ``file_client_args`` naming a backend makes mmengine import that
  backend's package (``petrel_client``, ``pavi``, ``mc``, ``lmdb``);
* ``trust_remote_code``, which makes Hugging Face run code it downloads or
  finds in a folder (mmpretrain's ``HuggingFaceClassifier``).

Checkpoints written with :class:`~sapiens_mm.engine.ConfigDataHook` carry
their config so (``meta['config_data']``), as exported models do
(:mod:`sapiens_mm.deploy`).
"""
import importlib.util
import re
from typing import Any, FrozenSet, Optional, Set, Tuple

__all__ = ['UnsafeModelError', 'STORED_CONFIG_SCOPES', 'config_to_data',
           'config_from_data']

_TUPLE = '__tuple__'
#: Config keys that make mmengine / mmpose import or execute files.
_CODE_KEYS = frozenset({'custom_imports', 'from_file', '_base_'})
#: ``custom_imports`` a stored config may name (dropped when read: these
#: packages are imported already).
_KNOWN_IMPORTS = frozenset({'sapiens_mm'})
#: The registry scopes a stored config may name (``_scope_``,
#: ``default_scope``, ``scope.Type``): the packages sapiens_mm registers
#: into. mmengine imports ``<scope>.registry`` for a scope.
STORED_CONFIG_SCOPES = ('mmengine', 'mmpretrain', 'mmpose', 'mmseg',
                        'mmdet')
#: Keys whose value is a scope.
_SCOPE_KEYS = frozenset({'_scope_', 'default_scope'})
#: Keys whose value mmengine looks up in a registry (``Registry.build`` /
#: ``get``): a type, the optimizer wrapper's constructor, a runner type.
_TYPE_KEYS = frozenset({'type', 'constructor', 'runner_type'})
#: Keys that choose a file storage backend (mmengine imports the backend's
#: package: ``petrel_client``, ``mc``, ``lmdb``); only local files pass.
_STORAGE_KEYS = frozenset({'backend_args', 'file_client_args'})
_LOCAL_BACKENDS = frozenset({'local', 'disk'})
#: Packages whose registries list the names a ``type`` may have.
_REGISTRY_PACKAGES = ('mmcv', ) + STORED_CONFIG_SCOPES[1:]
_TYPE_RE = re.compile(r'^(?:(?P<scope>[a-z_][a-z0-9_]*)\.)?'
                      r'(?P<name>[A-Za-z_][A-Za-z0-9_]*)\Z')


class UnsafeModelError(ValueError):
    """A file (checkpoint or exported model) holds something that could run
    code."""


def config_to_data(cfg) -> dict:
    """A config as JSON-serialisable data (no Python text).

    Args:
        cfg: An mmengine ``Config`` or a plain dict.

    Returns:
        A dict of dicts, lists, strings, numbers, booleans and None; tuples
        become ``{"__tuple__": [...]}`` so that :func:`config_from_data`
        restores them exactly.

    Raises:
        ValueError: A value is not plain data (e.g. a class or a function
            object from a lazy-import config).
    """
    data = cfg.to_dict() if hasattr(cfg, 'to_dict') else dict(cfg)
    imports = dict(data.get('custom_imports') or {}).get('imports') or []
    if set([imports] if isinstance(imports, str) else imports) <= \
            _KNOWN_IMPORTS:
        data.pop('custom_imports', None)  # sapiens_mm: imported anyway

    def encode(value: Any, where: str) -> Any:
        if isinstance(value, dict):
            return {
                str(k): encode(v, f'{where}.{k}')
                for k, v in value.items()
            }
        if isinstance(value, tuple):
            return {_TUPLE: [encode(v, f'{where}[{i}]')
                             for i, v in enumerate(value)]}
        if isinstance(value, list):
            return [encode(v, f'{where}[{i}]') for i, v in enumerate(value)]
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        raise ValueError(
            f'Config value {where.lstrip(".")} = {value!r} '
            f'({type(value).__name__}) is not plain data, so the config '
            'cannot be stored as data; use a string type name.')

    return encode(data, '')


def _registered_types() -> Tuple[FrozenSet[str], FrozenSet[Tuple[str, str]]]:
    """(names, (scope, name) pairs) registered in the OpenMMLab registries
    (mmengine's roots and the mmcv / mmpretrain / mmpose / mmseg / mmdet
    children that are installed)."""
    import importlib

    from mmengine import registry as root

    import sapiens_mm  # noqa: F401  (registers sapiens_mm's modules)
    modules = [root]
    for scope in _REGISTRY_PACKAGES:
        try:
            modules.append(importlib.import_module(f'{scope}.registry'))
        except ImportError:
            continue
    names: Set[str] = set()
    pairs: Set[Tuple[str, str]] = set()
    # mmengine's roots with their children, plus registries without a
    # parent (e.g. mmpose's KEYPOINT_CODECS)
    todo = [
        v for m in modules for v in vars(m).values()
        if isinstance(v, root.Registry)
    ]
    seen: Set[int] = set()
    while todo:
        reg = todo.pop()
        if id(reg) in seen:
            continue
        seen.add(id(reg))
        if hasattr(reg, 'import_from_location'):
            try:
                reg.import_from_location()
            except Exception:  # an uninstalled optional location
                pass
        for name in reg.module_dict:
            names.add(name)
            pairs.add((reg.scope, name))
        todo.extend(reg.children.values())
    return frozenset(names), frozenset(pairs)


def _shown(value: Any) -> str:
    """A stored value as a message shows it (at most 80 characters)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + '...'


def _importable(name: str) -> Optional[str]:
    """Where Python would import the top-level module ``name`` from, or
    None (nothing is imported; a failed lookup counts as importable)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return 'an unreadable location'
    if spec is None:
        return None
    return spec.origin or ', '.join(spec.submodule_search_locations or []) \
        or name


def _check_type(value: Any, where: str, source: str, registered) -> None:
    names, pairs = registered
    m = _TYPE_RE.match(value) if isinstance(value, str) else None
    ok = m is not None and (
        (m['scope'] is None and m['name'] in names)
        or (m['scope'] in STORED_CONFIG_SCOPES
            and (m['scope'], m['name']) in pairs))
    if not ok:
        raise UnsafeModelError(
            f'{source}: the stored config sets {where} = {_shown(value)}, '
            'which is not a class registered in mmengine / mmpose / mmseg / '
            'mmpretrain / mmdet (building it could import and run arbitrary '
            'code). The file was not written by sapiens_mm or was altered; '
            'pass your own config for it.')
    location = _importable(value) if m['scope'] is None else None
    if location is not None:
        raise UnsafeModelError(
            f'{source}: the stored config sets {where} = {value!r}, a '
            'registered class name that is also a module Python would '
            f'import ({location}): mmengine imports it when the registry '
            'that builds this entry does not know the name. Move that '
            'module out of the import path (e.g. the current folder), or '
            'pass your own config for this file.')


def _check_scope(value: Any, where: str, source: str) -> None:
    if value not in STORED_CONFIG_SCOPES:
        raise UnsafeModelError(
            f'{source}: the stored config sets {where} = {_shown(value)}; '
            'mmengine imports `<scope>.registry` for a scope, so a stored '
            f'config may only name {", ".join(STORED_CONFIG_SCOPES)}. The '
            'file was not written by sapiens_mm or was altered; pass your '
            'own config for it.')


def _check_storage(value: Any, where: str, source: str) -> None:
    # sapiens_mm's own crash-safe local backend imports nothing either
    from sapiens_mm.engine.fileio.atomic_local_backend import ATOMIC_BACKEND
    local = value is None or isinstance(value, dict) and \
        set(value) <= {'backend'} and \
        value.get('backend', 'local') in _LOCAL_BACKENDS | {ATOMIC_BACKEND}
    if not local:
        raise UnsafeModelError(
            f'{source}: the stored config sets {where} = {_shown(value)}; '
            'a storage backend other than local files makes mmengine import '
            'its package (petrel_client, memcached, lmdb). Pass your own '
            'config for this file.')


def _storage_scheme(value: str) -> Optional[str]:
    """The ``scheme://`` of a string mmengine would read through a storage
    package it imports (anything but local paths and http(s)), or None."""
    if '://' not in value or value.startswith(('http://', 'https://')):
        return None
    return value.split('://', 1)[0] + '://'


def _known_imports(value: Any) -> bool:
    imports = value.get('imports') if isinstance(value, dict) else None
    imports = [imports] if isinstance(imports, str) else imports
    return isinstance(imports, list) and set(imports) <= _KNOWN_IMPORTS


def config_from_data(data: Any, source: str = 'exported model'):
    """Rebuild the ``Config`` stored by :func:`config_to_data`, executing
    nothing.

    Args:
        data: The stored config (the ``config`` of the export metadata,
            a checkpoint's ``meta['config_data']``).
        source: Name of the file, for messages.

    Returns:
        An mmengine ``Config``.

    Raises:
        UnsafeModelError: ``data`` is Python text (metadata version 1), or
            holds a ``type`` (``constructor``, ``runner_type``) that is not
            a registered class name or is also an importable module, a
            scope (``_scope_``, ``default_scope``, ``scope.Type``) outside
            :data:`STORED_CONFIG_SCOPES`, a ``from_file`` or ``_base_``
            entry, ``custom_imports`` of anything but ``sapiens_mm``,
            ``trust_remote_code``, a storage backend or ``scheme://`` path
            other than local files and http(s), or a value that is not
            plain data (see the module docstring).
    """
    from mmengine.config import Config
    if isinstance(data, str):
        raise UnsafeModelError(
            f'{source} stores its config as Python text (export metadata '
            'version 1); sapiens_mm never executes such text, since a '
            'downloaded file could run any code through it. Re-export the '
            'model with tools/deploy/export.py, or pass your own config for '
            'it (e.g. --<task>-config CFG, or dict(config=..., '
            'checkpoint=...)).')
    if not isinstance(data, dict):
        raise UnsafeModelError(f'{source}: the stored config is a '
                               f'{type(data).__name__}, not a JSON object.')
    registered = _registered_types()

    def decode(value: Any, where: str) -> Any:
        if isinstance(value, dict):
            if set(value) == {_TUPLE} and isinstance(value[_TUPLE], list):
                return tuple(
                    decode(v, f'{where}[{i}]')
                    for i, v in enumerate(value[_TUPLE]))
            out = {}
            for k, v in value.items():
                key = f'{where}.{k}'.lstrip('.')
                if key == 'custom_imports' and _known_imports(v):
                    continue  # sapiens_mm itself: imported already
                if k in _CODE_KEYS or k == 'trust_remote_code' and v:
                    raise UnsafeModelError(
                        f'{source}: the stored config has `{key}`, which '
                        'makes OpenMMLab or Hugging Face import or execute '
                        'Python files; stored configs never need it. Pass '
                        'your own config for this file.')
                if k in _TYPE_KEYS and (k == 'type' or v is not None):
                    _check_type(v, key, source, registered)
                elif k in _SCOPE_KEYS:
                    _check_scope(v, key, source)
                elif k in _STORAGE_KEYS:
                    _check_storage(v, key, source)
                out[k] = decode(v, key)
            return out
        if isinstance(value, list):
            return [decode(v, f'{where}[{i}]') for i, v in enumerate(value)]
        if isinstance(value, str) and _storage_scheme(value):
            raise UnsafeModelError(
                f'{source}: the stored config sets {where} = {value[:80]!r}; '
                f'mmengine reads a {_storage_scheme(value)} location through '
                'a storage package it imports. Stored configs name local '
                'files (or http(s) addresses); pass your own config for '
                'this file.')
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        raise UnsafeModelError(f'{source}: stored config value {where} is a '
                               f'{type(value).__name__}, not plain data.')

    return Config(decode(data, ''))
