"""Run an exported Sapiens model without sapiens_mm / OpenMMLab.

Needs only numpy, OpenCV and onnxruntime (``.onnx``) or PyTorch (``.pt2``).
Everything it needs to know (task, input size, channel order, output stride,
heatmap codec, class names...) is read from the file's metadata, written by
``tools/deploy/export.py``. Copy this file next to your exported model and
run:

    python run_exported.py sapiens_pose.onnx photo.jpg --out-dir out
    python run_exported.py sapiens_seg.pt2 photo.jpg --out-dir out
    python run_exported.py sapiens_pose.onnx photo.jpg --bbox 10 20 200 400

Pre-processing (what the sapiens_mm test pipelines do):
  * seg / depth / normal: resize the BGR image to the input size (bilinear).
  * pose: a person box (x1, y1, x2, y2; default: the whole image) is padded
    by ``bbox_padding`` (1.25), widened to the input aspect ratio and cut out
    with the UDP affine warp (bilinear).
  * the network takes float32 (N, 3, H, W) BGR 0-255; normalisation is in the
    graph.

Post-processing (what eager mmpose / mmseg do):
  * seg: logits resized bilinearly to the input size, then to the image size,
    argmax -> (H, W) uint8 labels.
  * depth: same resizes -> (H, W) float32 relative depth (larger = farther).
  * normal: same resizes, then unit length -> (H, W, 3) float32.
  * pose: per heatmap, argmax + DARK-UDP refinement (Gaussian blur of
    ``blur_kernel_size``, log, one Newton step), scaled from the heatmap to
    the crop (``/(heatmap_size - 1) * input_size``), then from the crop to
    the image -> (K, 2) keypoints in pixels and (K,) scores.

Outputs in ``--out-dir``: ``<stem>.<task>.npy`` (seg, depth, normal) or
``<stem>.pose.json`` (keypoints, scores, names); two inputs with the same
stem get ``<stem>_1``, ``<stem>_2``... and ``outputs.json`` maps every input
to its output. Files are written atomically (temporary file + rename).

A ``.pt2`` graph is a program (torch evaluates its size expressions as
Python, and its operators can write files), so a ``.pt2`` runs only when
its SHA-256 is in sapiens_mm's per-user trust store (every ``.pt2`` that
``tools/deploy/export.py`` writes is recorded there; the store is
``$SAPIENS_MM_TRUST_STORE``, else ``$XDG_CONFIG_HOME/sapiens_mm/
trusted_pt2.json`` or ``~/.config/sapiens_mm/trusted_pt2.json``), or with
``--trust-pt2`` (you vouch for the file: it runs with your rights). Models
from elsewhere are best exchanged as ``.onnx``. A trusted archive is still
refused when torch would unpickle its weights (``use_pickle``, legacy
``.pt`` payloads, custom objects), or would run or import anything the
graph names beyond plain arithmetic on sizes, comparisons of input sizes
(``guards_code``), ATen operators that touch no file and Python names
(values, inputs, pytree specs of tuples, lists and dicts). ONNX metadata
is read as JSON. Run as a program, it sets OpenCV's decode limit to
50 megapixels (``$OPENCV_IO_MAX_IMAGE_PIXELS``, when not set already):
OpenCV refuses a larger image from the size its decoder reads, before
allocating it. Errors end with one line (``--debug`` shows the traceback).
"""
import argparse
import ast
import collections
import hashlib
import io
import json
import os
import os.path as osp
import re
import stat
import sys
import tempfile
import zipfile
from typing import Callable, Dict, List, Optional, Sequence, Tuple

#: Most pixels an input image may have (as sapiens_mm's default limit).
MAX_IMAGE_PIXELS = 50_000_000
if __name__ == '__main__':
    # Run as a program, it sets OpenCV's own decode limit (read once, when
    # cv2 loads): OpenCV refuses a larger image from the size its decoder
    # reads, before allocating it. Its refusal is this script's one line.
    os.environ.setdefault('OPENCV_IO_MAX_IMAGE_PIXELS', str(MAX_IMAGE_PIXELS))
    os.environ.setdefault('OPENCV_LOG_LEVEL', 'ERROR')

import cv2  # noqa: E402
import numpy as np  # noqa: E402


# ------------------------------------------------------------------ model
# Standalone copies of the checks in sapiens_mm.deploy.safe_load and of the
# trust store lookup of sapiens_mm.deploy.trust (this script must run
# without sapiens_mm; tests/deploy/test_pt2_trust.py keeps them in
# agreement): only plain-data entries are accepted.
_PT2_DATA = re.compile(
    r'^(archive_format|archive_version|byteorder|\.data/version|'
    r'\.data/serialization_id|models/[^/]+\.json|extra/[^/]+|'
    r'data/weights/weight_\d+|data/constants/tensor_\d+|'
    r'data/weights/[^/]+_weights_config\.json|'
    r'data/constants/[^/]+_constants_config\.json|'
    r'data/sample_inputs/[^/]+\.pt)\Z')


_SIZE_NAMES = frozenset({
    'Symbol', 'Integer', 'Rational', 'Add', 'Mul', 'Max', 'Min', 'Abs',
    'Eq', 'Ne', 'Lt', 'Le', 'Gt', 'Ge', 'Equality', 'Unequality',
    'StrictLessThan', 'LessThan', 'StrictGreaterThan', 'GreaterThan', 'And',
    'Or', 'Not', 'true', 'false', 'True', 'False', 'BooleanTrue',
    'BooleanFalse', 'FloorDiv', 'ModularIndexing', 'Where', 'PythonMod',
    'Mod', 'CleanDiv', 'CeilToInt', 'FloorToInt', 'CeilDiv', 'FloatTrueDiv',
    'IntTrueDiv', 'TruncToFloat', 'TruncToInt', 'RoundToInt', 'ToFloat',
    'Identity', 'positive', 'negative', 'nonnegative', 'nonpositive',
    'integer', 'real', 'finite', 'zero', 'nonzero', 'even', 'odd',
    'rational', 'commutative'
})
_SIZE_TOKEN = re.compile(r"""\s+|'[a-z]{1,3}\d+'|"[a-z]{1,3}\d+"|"""
                         r'\d{1,20}(?!\d)|[A-Za-z_][A-Za-z0-9_]*|'
                         r'[-+*/%(),<>=!]')
_SYM_TARGETS = frozenset(
    [f'_operator.{n}' for n in ('eq', 'ne', 'le', 'ge', 'lt', 'gt', 'neg',
                                'pos', 'mul', 'add', 'sub', 'floordiv',
                                'mod', 'truediv', 'and_', 'or_', 'getitem')]
    + ['math.trunc'] + [f'torch.sym_{n}' for n in ('not', 'int', 'float',
                                                    'ite', 'max', 'min',
                                                    'sqrt')])


def is_plain_size(text) -> bool:
    """Whether a graph's symbolic size (``expr_str``, which torch
    evaluates as Python) is plain arithmetic on size symbols."""
    if not isinstance(text, str) or len(text) > 4000 or '**' in text:
        return False
    pos = 0
    while pos < len(text):
        m = _SIZE_TOKEN.match(text, pos)
        if m is None:
            return False
        token = m.group()
        if (token[0].isalpha() or token[0] == '_') and \
                token not in _SIZE_NAMES and \
                not re.match(r'^[a-z]{1,3}\d+\Z', token):
            return False
        pos = m.end()
    return True


def _schema(target):
    """The ATen schema of a graph node's target, None if it is not an ATen
    operator a model export may call (file operators, ``set_``)."""
    import torch
    m = re.match(r'^torch\.ops\.aten\.([a-z_][a-z0-9_]*)\.(\w+)\Z',
                 target) if isinstance(target, str) else None
    if m is None or m[1] in ('from_file', 'save', 'set_', 'set_data'):
        return None
    try:
        return getattr(getattr(torch.ops.aten, m[1]), m[2])._schema
    except (AttributeError, RuntimeError):
        return None


def _tensors(arg) -> set:
    names, todo = set(), [arg]
    while todo:
        item = todo.pop()
        if isinstance(item, dict):
            for k, v in item.items():
                if k.startswith(('as_tensor', 'as_optional_tensor')) and \
                        isinstance(v, dict) and isinstance(v.get('name'),
                                                           str):
                    names.add(v['name'])
                else:
                    todo.append(v)
        elif isinstance(item, list):
            todo.extend(item)
    return names


def is_model_node(node: dict, external: set) -> bool:
    """Size arithmetic, or an ATen operator that touches no file and writes
    in place only tensors the graph computed (``external``: the inputs,
    weights, buffers and their views, grown by this node's views)."""
    if node['target'] in _SYM_TARGETS:
        return True
    schema = _schema(node['target'])
    if schema is None:
        return False
    args = {i.get('name'): i.get('arg') for i in node['inputs']
            if isinstance(i, dict)}
    written = set().union(*[_tensors(args.get(a.name))
                            for a in schema.arguments
                            if a.alias_info is not None
                            and a.alias_info.is_write])
    if written & external:
        return False
    if _tensors(list(args.values())) & external and \
            any(r.alias_info is not None for r in schema.returns):
        external |= _tensors(node.get('outputs'))
    return True


_NAME = re.compile(
    r'^(?:[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)?\Z')
_ARG_TEXT = re.compile(r'^[ !#-&(-\[\]-~]*\Z')
_TREESPEC_TYPES = frozenset({
    None, 'builtins.tuple', 'builtins.list', 'builtins.dict',
    'collections.OrderedDict', 'torch.fx.immutable_collections.'
    'immutable_list', 'torch.fx.immutable_collections.immutable_dict'
})
_GUARD_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod,
              ast.USub, ast.UAdd, ast.Not, ast.And, ast.Or, ast.Eq,
              ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def is_plain_guard(text) -> bool:
    """Whether a guard (``guards_code``, which ``.module()`` compiles with
    ``exec``) is one comparison of input sizes: integers, arithmetic,
    comparisons, ``max`` / ``min`` / ``abs`` / ``math.floor`` / ``ceil``
    / ``trunc`` and ``L[name][0].size()[1]``-style sizes."""
    if not isinstance(text, str) or len(text) > 4000 or \
            not _ARG_TEXT.match(text.replace("'", '')):
        return False
    try:
        tree = ast.parse(text, mode='eval')
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    todo = [(tree.body, False)]
    while todo:
        node, key = todo.pop()
        value = getattr(node, 'value', None)
        if key:
            if not (isinstance(node, ast.Constant) and (
                    isinstance(value, int) and not isinstance(value, bool)
                    or isinstance(value, str) and value.isidentifier())):
                return False
        elif isinstance(node, ast.Constant):
            if not isinstance(value, (int, float)):
                return False
        elif isinstance(node, ast.Name):
            if node.id != 'L':
                return False
        elif isinstance(node, ast.Subscript):
            todo += [(node.value, False), (node.slice, True)]
        elif isinstance(node, ast.Call):
            f = node.func
            if node.keywords:
                return False
            if isinstance(f, ast.Name) and f.id in ('max', 'min', 'abs') \
                    or isinstance(f, ast.Attribute) and \
                    isinstance(f.value, ast.Name) and f.value.id == 'math' \
                    and f.attr in ('floor', 'ceil', 'trunc'):
                todo += [(a, False) for a in node.args]
            elif isinstance(f, ast.Attribute) and not node.args and \
                    f.attr in ('size', 'stride', 'storage_offset', 'dim',
                               'numel'):
                todo.append((f.value, False))
            else:
                return False
        elif isinstance(node, (ast.BinOp, ast.UnaryOp, ast.BoolOp,
                               ast.Compare)):
            ops = getattr(node, 'ops', None) or [node.op]
            if not all(isinstance(op, _GUARD_OPS) for op in ops):
                return False
            todo += [(c, False) for c in ast.iter_child_nodes(node)
                     if isinstance(c, ast.expr)]
        else:
            return False
    return True


def is_plain_treespec(text) -> bool:
    """Whether a pytree spec (``in_spec`` / ``out_spec``; torch imports
    modules named in its contexts) holds only tuples, lists and dicts keyed
    by Python names or integers."""
    try:
        protocol, spec = json.loads(text)
    except (TypeError, ValueError):
        return False
    todo = [spec]
    while protocol == 1 and todo:
        node = todo.pop()
        if not isinstance(node, dict) or \
                set(node) != {'type', 'context', 'children_spec'} or \
                not isinstance(node['children_spec'], list) or \
                node['type'] not in _TREESPEC_TYPES:
            return False
        if node['context'] is not None:
            try:
                keys = json.loads(node['context'])
            except (TypeError, ValueError):
                return False
            if keys is not None and not (isinstance(keys, list) and all(
                    isinstance(k, int) and not isinstance(k, bool)
                    or isinstance(k, str) and k.isidentifier()
                    for k in keys)):
                return False
        todo.extend(node['children_spec'])
    return protocol == 1


def _program_problem(program):
    """The first part of a serialized program (graph JSON or payload
    config) that torch would turn into code or imports and that a model
    export never has, or None."""
    todo = collections.deque([(program, None)])  # in file order
    while todo:
        item, key = todo.popleft()
        if isinstance(item, dict):
            if isinstance(item.get('nodes'), list):  # a graph
                external = _tensors(item.get('inputs'))
                for node in item['nodes']:
                    if isinstance(node, dict) and 'target' in node and \
                            not is_model_node(node, external):
                        return f'the operator {str(node["target"])[:80]!r}'
            for k, v in item.items():
                if not isinstance(k, str) or not _NAME.match(k):
                    return f'the name {str(k)[:80]!r}'
                if k in ('metadata', 'torch_version'):  # kept as text
                    continue
                if k == 'expr_str' and not is_plain_size(v):
                    return f'the symbolic size {str(v)[:80]!r}'
                if k == 'guards_code' and not (isinstance(v, list) and all(
                        is_plain_guard(g) for g in v)):
                    return f'the guards {str(v)[:80]!r}'
                if k in ('in_spec', 'out_spec') and not is_plain_treespec(v):
                    return f'the pytree spec {str(v)[:80]!r}'
                if k in ('min_val', 'max_val') and v is not None and (
                        not isinstance(v, int) or isinstance(v, bool)):
                    return f'the size bound {v!r}'
                if k == 'as_operator' and not is_model_node(
                        dict(target=v, inputs=[]), set()):
                    return f'the operator {str(v)[:80]!r}'
                if k not in ('expr_str', 'guards_code', 'in_spec',
                             'out_spec', 'min_val', 'max_val',
                             'as_operator'):
                    todo.append((v, k))
        elif isinstance(item, list):
            todo.extend((v, key) for v in item)
        elif isinstance(item, str) and not (
                _ARG_TEXT if key in ('as_string', 'as_strings')
                else _NAME).match(item):
            return f'the string {item[:80]!r}'
    return None


def _plain_inputs(inputs) -> bool:
    """Whether loaded sample inputs are tensors and numbers in tuples,
    lists and dicts keyed by Python names (``.module()`` writes the keys
    into code)."""
    import torch
    todo = [inputs]
    while todo:
        item = todo.pop()
        if isinstance(item, (tuple, list)):
            todo.extend(item)
        elif isinstance(item, dict):
            if not all(isinstance(k, str) and k.isidentifier()
                       for k in item):
                return False
            todo.extend(item.values())
        elif not isinstance(item, (torch.Tensor, int, float, type(None))):
            return False
    return True


def trust_store_path() -> str:
    """sapiens_mm's ``.pt2`` trust store (``sapiens_mm.deploy.trust``)."""
    path = os.environ.get('SAPIENS_MM_TRUST_STORE')
    if path:
        return osp.abspath(osp.expanduser(path))
    base = os.environ.get('XDG_CONFIG_HOME') or (
        os.environ.get('APPDATA') if os.name == 'nt' else None) or \
        osp.join(osp.expanduser('~'), '.config')
    return osp.join(base, 'sapiens_mm', 'trusted_pt2.json')


def trusted_digests() -> set:
    """SHA-256 digests of the ``.pt2`` files sapiens_mm exported here (or
    a user vouched for); empty without a usable store."""
    store = trust_store_path()
    if not osp.isfile(store):
        return set()
    if os.name == 'posix':
        for p in (store, osp.dirname(store)):
            st = os.stat(p)
            if st.st_uid != os.getuid() or \
                    st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                raise ValueError(
                    f'The .pt2 trust store {p} is writable by other users '
                    f'or not owned by you; fix it with `chmod go-w {p}`.')
    try:
        with open(store, encoding='utf-8') as f:
            data = json.load(f)
        return set(data['files'])
    except (OSError, ValueError, KeyError, TypeError):
        raise ValueError(f'The .pt2 trust store {store} is unreadable or '
                         'altered; delete it and re-export.') from None


def check_pt2(path: str, file=None, trusted: bool = False) -> None:
    """Refuse a ``.pt2`` archive that is not trusted (its digest is not in
    the trust store and ``trusted`` is False), or that ``torch.export.load``
    would unpickle or evaluate code from (see
    ``sapiens_mm.deploy.safe_load.check_pt2_archive``)."""
    import torch
    if not trusted:
        f = open(path, 'rb') if file is None else file
        try:
            f.seek(0)
            digest = hashlib.file_digest(f, 'sha256').hexdigest()
        finally:
            if file is None:
                f.close()
        if digest not in trusted_digests():
            raise ValueError(
                f'Refused {path}: this .pt2 was not exported on this machine '
                f'(its SHA-256 is not in the trust store {trust_store_path()})'
                ', and a .pt2 graph is a program that can run code and write '
                'files. Re-export it here from its checkpoint, use the .onnx '
                'export instead, or pass --trust-pt2 if you vouch for it.')
    if file is not None:
        file.seek(0)
    try:
        archive = zipfile.ZipFile(path if file is None else file)
    except (zipfile.BadZipFile, OSError) as e:
        raise ValueError(f'{path} is not a .pt2 archive ({e}).') from None
    with archive:
        for name in archive.namelist():
            rel = name.split('/', 1)[-1]
            if not rel or rel.endswith('/'):
                continue
            if not _PT2_DATA.match(rel):
                raise ValueError(f'Refused {path}: entry {rel!r} is not '
                                 'plain data (pickled weights or code).')
            raw = archive.read(name)
            program = rel.endswith('_config.json') or \
                rel.startswith('models/')
            try:
                data = json.loads(raw) if program else None
            except ValueError:
                raise ValueError(f'Refused {path}: {rel} is not valid '
                                 'JSON.') from None
            if rel.endswith('_config.json'):
                entries = data.get('config') if isinstance(data,
                                                           dict) else None
                bad = [k for k, v in dict(entries or {}).items()
                       if not isinstance(v, dict) or v.get('use_pickle')
                       or not re.match(r'^(weight|tensor)_\d+\Z',
                                       str(v.get('path_name')))]
                if bad or not isinstance(entries, dict):
                    raise ValueError(
                        f'Refused {path}: {(bad or [rel])[0]!r} is stored as '
                        'a pickle (use_pickle), which torch would unpickle '
                        'with weights_only=False (it can run code).')
            if program:
                problem = _program_problem(data)
                if problem:
                    raise ValueError(
                        f'Refused {path}: its {rel} has {problem}, which a '
                        'model export never has (it could run code or '
                        'write files).')
            elif rel.endswith('.pt'):
                try:
                    inputs = torch.load(io.BytesIO(raw), weights_only=True)
                except Exception:
                    inputs = object()
                if not _plain_inputs(inputs):
                    raise ValueError(
                        f'Refused {path}: its sample inputs are not plain '
                        'tensors under Python names.') from None


def load_model(path: str, trust_pt2: bool = False
               ) -> Tuple[Callable[[np.ndarray], np.ndarray], dict]:
    """``(run, metadata)``: ``run`` maps a float32 (N, 3, H, W) batch to the
    raw float32 output. ``trust_pt2``: run a ``.pt2`` that is not in the
    trust store (the caller vouches for it)."""
    if not osp.isfile(path):
        raise FileNotFoundError(f'Model not found: {path}')
    if path.endswith('.onnx'):
        import onnxruntime as ort
        try:
            session = ort.InferenceSession(
                path, providers=['CPUExecutionProvider'])
        except Exception as e:
            raise ValueError(f'{path} is not a readable ONNX model '
                             f'({str(e).splitlines()[0]}).') from None
        raw = session.get_modelmeta().custom_metadata_map
        try:
            meta = {k: json.loads(v) for k, v in raw.items()}
        except json.JSONDecodeError:
            meta = {}
        name = session.get_inputs()[0].name

        def run(images: np.ndarray) -> np.ndarray:
            return session.run(None, {name: images})[0]
    elif path.endswith('.pt2'):
        import torch
        with open(path, 'rb') as f:  # torch reads the file that was checked
            check_pt2(path, f, trusted=trust_pt2)
            f.seek(0)
            module = torch.export.load(f).module()
        meta = _pt2_metadata(path)

        def run(images: np.ndarray) -> np.ndarray:
            with torch.no_grad():
                return module(torch.from_numpy(images)).numpy()
    else:
        raise ValueError(f'{path}: expected a .onnx or .pt2 file.')
    if meta.get('format') != 'sapiens_mm.export':
        raise ValueError(f'{path} has no sapiens_mm export metadata.')
    return run, meta


def _pt2_metadata(path: str) -> dict:
    with zipfile.ZipFile(path) as archive:
        for name in archive.namelist():
            if name.endswith('extra/sapiens_mm.json'):
                return json.loads(archive.read(name))
    if osp.isfile(path + '.json'):
        with open(path + '.json') as f:
            return json.load(f)
    return {}


# --------------------------------------------------------- pre-processing
def resize_input(img: np.ndarray, meta: dict) -> np.ndarray:
    """(3, H, W) float32 network input of a BGR image (dense tasks)."""
    h, w = meta['input_size']
    out = cv2.resize(img, (w, h), interpolation=cv2.INTER_LINEAR)
    return out.transpose(2, 0, 1).astype(np.float32)


def udp_warp_matrix(center: np.ndarray, scale: np.ndarray,
                    output_size: Tuple[int, int]) -> np.ndarray:
    """2x3 UDP affine matrix from a box (center, scale (w, h)) to an
    ``output_size`` (w, h) crop (no rotation)."""
    scale_x = (output_size[0] - 1) / scale[0]
    scale_y = (output_size[1] - 1) / scale[1]
    mat = np.zeros((2, 3), np.float32)
    mat[0, 0] = scale_x
    mat[0, 2] = scale_x * (-center[0] + 0.5 * scale[0])
    mat[1, 1] = scale_y
    mat[1, 2] = scale_y * (-center[1] + 0.5 * scale[1])
    return mat


def crop_person(img: np.ndarray, bbox: Sequence[float],
                meta: dict) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(input (3, H, W), center, scale)`` of one person box (pose)."""
    h, w = meta['input_size']
    box = np.asarray(bbox[:4], np.float32)
    center = (box[2:] + box[:2]) * 0.5
    scale = (box[2:] - box[:2]) * float(meta['bbox_padding'])
    aspect = w / h
    if scale[0] > scale[1] * aspect:
        scale = np.array([scale[0], scale[0] / aspect], np.float32)
    else:
        scale = np.array([scale[1] * aspect, scale[1]], np.float32)
    mat = udp_warp_matrix(center, scale, (w, h))
    crop = cv2.warpAffine(img, mat, (w, h), flags=cv2.INTER_LINEAR)
    return crop.transpose(2, 0, 1).astype(np.float32), center, scale


# -------------------------------------------------------- post-processing
def _resize_maps(out: np.ndarray, meta: dict,
                 image_hw: Tuple[int, int]) -> np.ndarray:
    """(C, h, w) -> (H_img, W_img, C): bilinear to the input size, then to
    the image size (half-pixel centres, as torch's align_corners=False)."""
    in_h, in_w = meta['input_size']
    maps = out.transpose(1, 2, 0)
    maps = cv2.resize(maps, (in_w, in_h), interpolation=cv2.INTER_LINEAR)
    maps = cv2.resize(maps, (image_hw[1], image_hw[0]),
                      interpolation=cv2.INTER_LINEAR)
    return maps.reshape(image_hw[0], image_hw[1], -1)


def decode_heatmaps(heatmaps: np.ndarray,
                    meta: dict) -> Tuple[np.ndarray, np.ndarray]:
    """UDP heatmap decoding: (K, h, w) -> keypoints (K, 2) in crop pixels
    and scores (K,)."""
    k, h, w = heatmaps.shape
    flat = heatmaps.reshape(k, -1)
    idx = np.argmax(flat, axis=1)
    scores = flat[np.arange(k), idx]
    locs = np.stack([idx % w, idx // w], axis=-1).astype(np.float32)
    locs[scores <= 0] = -1
    # DARK-UDP: blur (rescaled to the original peak), log, Newton step
    ks = int(meta['codec']['blur_kernel_size'])
    border = (ks - 1) // 2
    blurred = np.empty_like(heatmaps, dtype=np.float32)
    for i in range(k):
        padded = np.zeros((h + 2 * border, w + 2 * border), np.float32)
        padded[border:-border, border:-border] = heatmaps[i]
        padded = cv2.GaussianBlur(padded, (ks, ks), 0)
        blurred[i] = padded[border:-border, border:-border]
        blurred[i] *= heatmaps[i].max() / blurred[i].max()
    np.clip(blurred, 1e-3, 50., blurred)
    np.log(blurred, blurred)
    pad = np.pad(blurred, ((0, 0), (1, 1), (1, 1)), mode='edge').ravel()
    index = (locs[:, 0] + 1 + (locs[:, 1] + 1) * (w + 2) + (w + 2) *
             (h + 2) * np.arange(k)).astype(int)
    i_ = pad[index]
    ix1, ix1_ = pad[index + 1], pad[index - 1]
    iy1, iy1_ = pad[index + w + 2], pad[index - w - 2]
    ix1y1, ix1_y1_ = pad[index + w + 3], pad[index - w - 3]
    dx, dy = 0.5 * (ix1 - ix1_), 0.5 * (iy1 - iy1_)
    dxx = ix1 - 2 * i_ + ix1_
    dyy = iy1 - 2 * i_ + iy1_
    dxy = 0.5 * (ix1y1 - ix1 - iy1 + i_ + i_ - ix1_ - iy1_ + ix1_y1_)
    hessian = np.stack([dxx, dxy, dxy, dyy], axis=1).reshape(k, 2, 2)
    hessian = np.linalg.inv(hessian + np.finfo(np.float32).eps * np.eye(2))
    locs -= np.einsum('kmn,kn->km', hessian, np.stack([dx, dy], axis=1))
    hm_w, hm_h = meta['codec']['heatmap_size']
    locs = locs / [hm_w - 1, hm_h - 1] * meta['codec']['input_size']
    return locs.astype(np.float32), scores.astype(np.float32)


# ----------------------------------------------------------------- driver
def predict(run: Callable,
            meta: dict,
            img: np.ndarray,
            bboxes: Optional[np.ndarray] = None) -> Dict[str, np.ndarray]:
    """Predictions of one BGR uint8 image.

    Returns:
        pose: ``keypoints`` (N, K, 2) image pixels and ``keypoint_scores``
        (N, K) for the N boxes (default: the whole image); seg ``labels``
        (H, W) uint8; depth ``depth`` (H, W); normal ``normal`` (H, W, 3).
    """
    task = meta['task']
    hw = img.shape[:2]
    if task == 'pose':
        if bboxes is None:
            bboxes = np.array([[0, 0, hw[1], hw[0]]], np.float32)
        crops = [crop_person(img, box, meta) for box in bboxes]
        heatmaps = run(np.stack([c[0] for c in crops]))
        in_w, in_h = meta['codec']['input_size']
        kpts, scores = [], []
        for hm, (_, center, scale) in zip(heatmaps, crops):
            k, s = decode_heatmaps(hm, meta)
            kpts.append(k / [in_w, in_h] * scale + center - 0.5 * scale)
            scores.append(s)
        kpts, scores = np.stack(kpts), np.stack(scores)
        if 'output_keypoint_indices' in meta:
            sel = meta['output_keypoint_indices']
            kpts, scores = kpts[:, sel], scores[:, sel]
        return dict(keypoints=kpts.astype(np.float32),
                    keypoint_scores=scores.astype(np.float32))
    out = run(resize_input(img, meta)[None])[0]
    maps = _resize_maps(out, meta, hw)
    if task == 'seg':
        return dict(labels=maps.argmax(axis=-1).astype(np.uint8))
    if task == 'depth':
        return dict(depth=maps[..., 0].astype(np.float32))
    norm = np.maximum(np.linalg.norm(maps, axis=-1, keepdims=True), 1e-12)
    return dict(normal=(maps / norm).astype(np.float32))


def _atomic_save(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file and a rename: a full
    disk leaves no truncated file under the final name."""
    tmp = None
    try:
        # mkstemp: a new file with an unpredictable name (O_EXCL), so a
        # planted file or symlink is never written through
        fd, tmp = tempfile.mkstemp(prefix=f'.{osp.basename(path)}.tmp',
                                   dir=osp.dirname(path) or '.')
        if hasattr(os, 'fchmod'):  # as open(path, 'wb') would create it
            mask = os.umask(0)
            os.umask(mask)
            os.fchmod(fd, 0o666 & ~mask)
        with os.fdopen(fd, 'wb') as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        if tmp is not None and osp.exists(tmp):
            os.remove(tmp)
        raise OSError(e.errno, f'Could not write {path}: '
                      f'{e.strerror or e}; nothing was written under that '
                      'name.') from None


def unique_stems(paths: Sequence[str]) -> List[str]:
    """One output stem per input: the file stem, with ``_1``, ``_2``...
    added where another input already has it (``x.jpg``, ``x.png`` and
    ``x_1.png`` become ``x``, ``x_2``, ``x_1``)."""
    stems = [osp.splitext(osp.basename(p))[0] for p in paths]
    taken = set()
    out: List[Optional[str]] = [None] * len(stems)
    for i, stem in enumerate(stems):  # first occurrences keep their name
        if stem not in taken:
            taken.add(stem)
            out[i] = stem
    for i, stem in enumerate(stems):
        if out[i] is None:
            n = 1
            while f'{stem}_{n}' in taken:
                n += 1
            out[i] = f'{stem}_{n}'
            taken.add(out[i])
    return out


def main(argv: Optional[Sequence[str]] = None) -> None:
    p = argparse.ArgumentParser(
        description='Run an exported Sapiens .onnx / .pt2 model on images '
        'with numpy, OpenCV and onnxruntime / torch only.')
    p.add_argument('model', help='exported .onnx or .pt2 file')
    p.add_argument('images', nargs='+', help='image files')
    p.add_argument('--out-dir',
                   default='outputs',
                   help='output folder (default: %(default)s)')
    p.add_argument('--bbox',
                   type=float,
                   nargs=4,
                   action='append',
                   metavar=('X1', 'Y1', 'X2', 'Y2'),
                   help='pose: a person box in pixels (repeat for more; '
                   'default: the whole image)')
    p.add_argument('--trust-pt2', action='store_true',
                   help='run a .pt2 that sapiens_mm did not export on this '
                   'machine (not in its trust store). A .pt2 graph is a '
                   'program that runs with your rights: only for files you '
                   'vouch for; prefer .onnx for models from elsewhere')
    p.add_argument('--debug', action='store_true',
                   help='on an error, show the full traceback')
    args = p.parse_args(argv)
    try:
        os.makedirs(args.out_dir, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix='.write_test',
                                     dir=args.out_dir)
        os.close(fd)
        os.remove(probe)
    except OSError as e:
        raise OSError(e.errno, f'Cannot write to --out-dir {args.out_dir} '
                      f'({e.strerror or e}).') from None
    bboxes = np.asarray(args.bbox, np.float32) if args.bbox else None
    if bboxes is not None:
        bad = [b.tolist() for b in bboxes
               if not np.isfinite(b).all() or b[2] <= b[0] or b[3] <= b[1]]
        if bad:
            raise ValueError(f'--bbox {bad[0]} is not a box with x2 > x1 and '
                             'y2 > y1 (finite pixel coordinates).')
    run, meta = load_model(args.model, trust_pt2=args.trust_pt2)
    mapping = {}
    for path, stem in zip(args.images, unique_stems(args.images)):
        try:
            img = cv2.imread(path, cv2.IMREAD_COLOR)
        except cv2.error:  # e.g. over OpenCV's pixel limit
            img = None
        if img is None:
            raise ValueError(
                f'Cannot read image {path} (not an image OpenCV reads, or '
                'over $OPENCV_IO_MAX_IMAGE_PIXELS pixels: '
                f'{os.environ.get("OPENCV_IO_MAX_IMAGE_PIXELS", "2^30")}).')
        pred = predict(run, meta, img, bboxes)
        base = osp.join(args.out_dir, stem)
        if meta['task'] == 'pose':
            out = f'{base}.pose.json'
            _atomic_save(out, json.dumps(
                dict(keypoint_names=meta.get('keypoint_names'),
                     keypoints=pred['keypoints'].tolist(),
                     keypoint_scores=pred['keypoint_scores'].tolist())
            ).encode())
        else:
            out = f'{base}.{meta["task"]}.npy'
            buf = io.BytesIO()
            np.save(buf, next(iter(pred.values())))
            _atomic_save(out, buf.getvalue())
        mapping[path] = out
        print(f'{path}: {meta["task"]} -> {out}')
    _atomic_save(osp.join(args.out_dir, 'outputs.json'),
                 json.dumps(mapping, indent=1).encode())


if __name__ == '__main__':
    try:
        main()
    except Exception as e:  # one line unless --debug
        if '--debug' in sys.argv:
            raise
        sys.exit(f'run_exported.py: error: {e} (--debug shows the '
                 'traceback)')
