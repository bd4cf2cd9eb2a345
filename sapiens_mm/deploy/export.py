"""Export Sapiens task models to ONNX and ``torch.export`` (``.pt2``).

Each task model (backbone + head) is wrapped in :class:`SapiensExportModule`,
which takes the images the way the test pipeline produces them and returns the
raw head output:

* input ``images``: float32 ``(N, 3, H, W)``, **BGR** (as decoded by OpenCV),
  pixel values 0-255, at the model's input size. The data preprocessor's
  BGR -> RGB swap and mean / std normalisation are inside the graph.
* output (at ``H / stride`` x ``W / stride``):

  - pose ``heatmaps`` ``(N, K, H/4, W/4)``: one heatmap per keypoint; with the
    config's flip test, already averaged with the un-flipped heatmaps of the
    mirrored crop (as eager mmpose does).
  - seg ``logits`` ``(N, C, H/2, W/2)``: class logits.
  - depth ``depth`` ``(N, 1, H, W)``: relative depth (larger = farther).
  - normal ``normal`` ``(N, 3, H/2, W/2)``: un-normalised XYZ normals
    (Sapiens2: at ``H x W``).
  - Sapiens2 pointmap ``pointmap`` ``(N, 3, H, W)``: metric camera-frame XYZ
    (the canonical pointmap divided by the predicted scale).
  - Sapiens2 albedo ``albedo`` ``(N, 3, H, W)``: RGB, not clamped.
  - Sapiens2 matting ``matting`` ``(N, 4, H, W)``: pre-multiplied
    foreground RGB and alpha after the sigmoid, in [0, 1].

The batch dimension is dynamic: one file serves any batch size. What a
consumer needs to pre- and post-process (task, input size, mean / std,
channel order, output meaning and stride, keypoint / class names, skeleton,
heatmap codec, the full config) is stored with the file (see
:mod:`sapiens_mm.deploy.metadata`, whose :func:`read_metadata` reads it).
"""
import json
import os
import os.path as osp
import shutil
import tempfile
from typing import Dict, Literal, Optional, Sequence, Tuple, Union

import torch
import torch.nn as nn
from mmengine.config import Config
from mmengine.logging import print_log

from sapiens_mm.apis.inference import (
    find_pipeline_step,
    init_model,
    load_config,
    pose_dataset_meta,
    seg_dataset_meta,
    set_input_size,
    skeleton_name,
    task_of_config,
)
from sapiens_mm.engine.fileio import atomic_path, atomic_write
from sapiens_mm.tasks import MAP_TASKS, Task
from sapiens_mm.utils.cpu_kernels import pytorch_ops_only

from .metadata import INPUT_NAME, METADATA_VERSION, OUTPUT_NAMES, PT2_EXTRA
from .safe_load import UnsafeModelError, config_to_data
from .trust import UntrustedModelError, trust_exported_program

__all__ = [
    'SapiensExportModule', 'check_test_cfg', 'export_metadata',
    'export_model', 'MIN_OPSET', 'DEFAULT_OPSET'
]

#: Oldest ONNX opset supported (torch's dynamo exporter writes opset 18
#: natively and converts down to 17).
MIN_OPSET = 17
DEFAULT_OPSET = 18
_OUTPUT_MEANING = dict(
    pose='heatmaps (N, K, H/stride, W/stride), one per keypoint; decode '
    'with the codec (argmax + DARK-UDP refinement), then map from the crop '
    'to the image',
    seg='class logits (N, C, H/stride, W/stride); resize bilinearly to the '
    'input size, then to the image size, then argmax over C',
    depth='relative depth (N, 1, H/stride, W/stride), larger = farther, no '
    'unit; resize bilinearly to the input size, then to the image size',
    normal='camera-frame surface normals XYZ (N, 3, H/stride, W/stride), not '
    'normalised; resize bilinearly to the input size, then to the image '
    'size, then divide by the L2 norm over the 3 channels (Sapiens2: '
    'normalise first, crop the ResizePadImage padding, then resize)',
    pointmap='metric camera-frame XYZ (N, 3, H, W) (Sapiens2: the canonical '
    'pointmap divided by the predicted scale); crop the ResizePadImage '
    'padding, blur (4 x 3x3 Gaussian, sigma 0.8) when upsampling, resize '
    'bilinearly to the image size',
    albedo='RGB albedo (N, 3, H, W); clamp to [0, 1], crop the '
    'ResizePadImage padding, resize bilinearly to the image size',
    matting='matte (N, 4, H, W) in [0, 1]: channels 0-2 the foreground RGB '
    'pre-multiplied by alpha, channel 3 alpha (the whole frame was '
    'stretched to the input size); resize bilinearly to the image size, '
    'clamp to [0, 1]; composite = foreground + (1 - alpha) * background')


def _model_input_size(cfg: Config, task: str) -> Tuple[int, int]:
    """(H, W) the test pipeline feeds the model."""
    if task == 'pose':
        w, h = cfg.model.head.decoder['input_size']
        return int(h), int(w)
    size = cfg.model.data_preprocessor.get('size')
    if size is None:
        raise ValueError(
            'The config\'s data_preprocessor has no `size`: the exported '
            'graph needs a fixed input size; pass input_size=(H, W).')
    return int(size[0]), int(size[1])


class SapiensExportModule(nn.Module):
    """A task model as one exportable graph: normalise, encode, decode.

    Args:
        model: A built pose (``TopdownPoseEstimator``), seg
            (``EncoderDecoder``), depth / normal (``SapiensDenseEstimator``)
            or Sapiens2 normal / pointmap / albedo / matting
            (``Sapiens2DenseEstimator``) model.
        task: ``'pose'``, ``'seg'``, ``'depth'``, ``'normal'``,
            ``'pointmap'``, ``'albedo'`` or ``'matting'``.
        mean: Per-channel mean in the model's channel order (RGB when
            ``bgr_to_rgb``), 0-255 scale.
        std: Per-channel standard deviation, same order.
        bgr_to_rgb: Swap the input's BGR channels to RGB first.
        flip_indices: Pose flip test: the mirror keypoint of each keypoint.
            None: no flip test.
        flip_dense: Depth / normal flip test (``test_cfg.flip``): average
            with the un-flipped prediction of the mirrored image (normal X
            negated).
    """

    def __init__(self,
                 model: nn.Module,
                 task: Task,
                 mean: Sequence[float],
                 std: Sequence[float],
                 bgr_to_rgb: bool = True,
                 flip_indices: Optional[Sequence[int]] = None,
                 flip_dense: bool = False) -> None:
        super().__init__()
        if task not in OUTPUT_NAMES:
            raise ValueError(f'task must be one of {list(OUTPUT_NAMES)}, '
                             f'got {task!r}.')
        self.model, self.task = model, task
        self.bgr_to_rgb = bool(bgr_to_rgb)
        self.register_buffer('mean',
                             torch.tensor(mean, dtype=torch.float32).view(
                                 1, -1, 1, 1),
                             persistent=False)
        self.register_buffer('std',
                             torch.tensor(std, dtype=torch.float32).view(
                                 1, -1, 1, 1),
                             persistent=False)
        self.flip_indices = None if flip_indices is None else [
            int(i) for i in flip_indices
        ]
        self.flip_dense = bool(flip_dense)

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        feats = self.model.extract_feat(x)
        if self.task == 'pose':
            return self.model.head.forward(feats)
        if self.task == 'pointmap':  # Sapiens2: (canonical, scale) -> metric
            head = self.model.decode_head
            return head.metric_pointmap(*head.forward(feats))
        return self.model.decode_head.forward(feats)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Raw head output of a batch.

        Args:
            images: (N, 3, H, W) float32 BGR images, 0-255.

        Returns:
            Pose heatmaps (N, K, H/4, W/4), seg logits (N, C, H/2, W/2),
            depth (N, 1, H, W) or normals (N, 3, H/2, W/2) for the default
            heads.
        """
        x = images
        if self.bgr_to_rgb:
            x = x.flip(1)
        x = (x - self.mean) / self.std
        pose_flip = self.task == 'pose' and self.flip_indices is not None
        if not (pose_flip or self.flip_dense):
            return self._head(x)
        # the image and its mirror in one pass (a 2N batch)
        n = x.shape[0]
        both = self._head(torch.cat([x, x.flip(-1)]))
        out, flipped = both[:n], both[n:]
        if pose_flip:
            flipped = flipped.flip(-1)[:, self.flip_indices]
            return (out + flipped) * 0.5
        return (out + self.model.unflip(flipped)) / 2.0


def check_test_cfg(task: str, model: nn.Module) -> Tuple[bool, bool]:
    """Whether the exported graph holds a flip test, from the model's
    ``test_cfg``.

    Returns:
        (pose flip test, dense flip test).

    Raises:
        ValueError: A test mode the exported graph cannot reproduce (pose
            flip with ``shift_heatmap`` or another ``flip_mode``, dense
            ``mode`` other than ``'whole'``).
    """
    test_cfg = dict(model.test_cfg or {})
    if task == 'pose':
        mode = test_cfg.get('flip_mode', 'heatmap')
        flip = bool(test_cfg.get('flip_test', False))
        if flip and (mode != 'heatmap' or test_cfg.get('shift_heatmap')):
            raise ValueError(
                f'Export supports the flip test with flip_mode="heatmap" and '
                f'shift_heatmap=False; the config has flip_mode={mode!r}, '
                f'shift_heatmap={test_cfg.get("shift_heatmap")}. Change '
                'model.test_cfg.')
        return flip, False
    mode = test_cfg.get('mode', 'whole')
    if mode != 'whole':
        raise ValueError(
            f'test_cfg.mode={mode!r}: an exported model predicts the whole '
            'image at once; set model.test_cfg.mode="whole".')
    return False, task in MAP_TASKS and bool(
        test_cfg.get('flip', False))


def export_metadata(task: str, cfg: Config, model: nn.Module,
                    input_size: Tuple[int, int], output_shape: Sequence[int],
                    flip_test: bool) -> dict:
    """What a consumer needs to pre- and post-process the exported model.

    Args:
        task: The model's task.
        cfg: Its config (test pipeline, codec, dataset).
        model: The built model.
        input_size: (H, W) of the graph input.
        output_shape: (C, h, w) of the graph output for one image.
        flip_test: Whether the graph contains the flip test.

    Returns:
        A JSON-serialisable dict (see the README, "Deployment").
    """
    from sapiens_mm.version import __version__
    pre = cfg.model.data_preprocessor
    h, w = input_size
    channels, out_h, out_w = (int(v) for v in output_shape)
    meta = dict(
        format='sapiens_mm.export',
        format_version=METADATA_VERSION,
        sapiens_mm_version=__version__,
        task=task,
        input_name=INPUT_NAME,
        input_shape=['batch', 3, h, w],
        input_size=[h, w],
        input_dtype='float32',
        channel_order='BGR',
        pixel_range=[0, 255],
        normalization_in_graph=True,
        mean=[float(v) for v in pre.mean],
        std=[float(v) for v in pre.std],
        mean_std_channel_order='RGB' if pre.get('bgr_to_rgb') else 'BGR',
        output_name=OUTPUT_NAMES[task],
        output_shape=['batch', channels, out_h, out_w],
        output_stride=h // out_h,
        output_meaning=_OUTPUT_MEANING[task],
        flip_test_in_graph=bool(flip_test),
        resize_align_corners=bool(getattr(model, 'align_corners', False)),
    )
    if task == 'pose':
        dataset_meta = pose_dataset_meta(cfg)
        codec = dict(cfg.model.head.decoder)
        k = int(dataset_meta['num_keypoints'])
        pipeline = cfg.test_dataloader.dataset.pipeline
        center_scale = find_pipeline_step(pipeline, 'GetBBoxCenterScale') or {}
        meta.update(
            num_keypoints=k,
            keypoint_names=[
                dataset_meta['keypoint_id2name'][i] for i in range(k)
            ],
            skeleton=skeleton_name(dataset_meta),
            skeleton_links=[[int(a), int(b)]
                            for a, b in dataset_meta.get('skeleton_links', [])
                            ],
            flip_indices=[int(i) for i in dataset_meta['flip_indices']],
            codec=dict(type=str(codec['type']),
                       input_size=[int(v) for v in codec['input_size']],
                       heatmap_size=[int(v) for v in codec['heatmap_size']],
                       blur_kernel_size=int(codec.get('blur_kernel_size',
                                                      11))),
            bbox_padding=float(center_scale.get('padding', 1.25)),
            crop='UDP affine warp (mmpose TopdownAffine use_udp=True)',
        )
        indices = dict(model.test_cfg or {}).get('output_keypoint_indices')
        if indices is not None:
            meta['output_keypoint_indices'] = [int(i) for i in indices]
    elif task == 'seg':
        num_classes = int(model.decode_head.out_channels)
        meta['num_classes'] = num_classes
        try:
            classes = seg_dataset_meta(num_classes)
        except ValueError:  # not a shipped vocabulary
            classes = None
        if classes is not None:
            meta.update(vocab=classes['vocab'],
                        class_names=list(classes['classes']),
                        palette=classes['palette'])
    meta['config'] = config_to_data(cfg)
    return meta


def export_model(config: Union[str, Config],
                 checkpoint: Optional[str],
                 out_dir: str,
                 formats: Sequence[Literal['onnx', 'pt2']] = ('onnx', 'pt2'),
                 input_size: Optional[Tuple[int, int]] = None,
                 opset: int = DEFAULT_OPSET,
                 name: Optional[str] = None,
                 max_batch: int = 1024) -> Dict[str, str]:
    """Export a task model with a dynamic batch dimension.

    Args:
        config: Task config (file or Config).
        checkpoint: Weights (None: random / config initialisation).
        out_dir: Output folder (created).
        formats: ``'onnx'`` and / or ``'pt2'``.
        input_size: (H, W) of the exported graph. Defaults to the config's
            input size (1024x768 for the released sizes).
        opset: ONNX opset, at least 17. Defaults to 18 (17 is converted down
            by the ONNX version converter).
        name: File stem. Defaults to the config's file name, or ``model``.
        max_batch: Largest batch the graph accepts. Defaults to 1024.

    Returns:
        ``{'onnx': path, 'pt2': path, 'pt2_json': path}`` for what was
        written. A model whose weights exceed 2 GB is written as
        ``<name>.onnx`` plus ``<name>.onnx.data`` (ONNX external data).

    Raises:
        ValueError: Unknown format, opset below 17, bad input size or an
            unsupported test mode.
    """
    formats = tuple(
        dict.fromkeys([formats] if isinstance(formats, str) else formats))
    bad = [f for f in formats if f not in ('onnx', 'pt2')]
    if bad or not formats:
        raise ValueError(f'formats must be "onnx" and / or "pt2", got '
                         f'{list(formats)}.')
    if 'onnx' in formats and (not isinstance(opset, int) or opset < MIN_OPSET):
        raise ValueError(f'ONNX opset {opset} is not supported: use '
                         f'{MIN_OPSET} or newer (default {DEFAULT_OPSET}).')
    if not isinstance(max_batch, int) or max_batch < 2:
        raise ValueError(f'max_batch must be an int >= 2, got {max_batch!r}.')
    if name is None:
        name = osp.splitext(osp.basename(config))[0] if isinstance(
            config, (str, os.PathLike)) else 'model'
    cfg = load_config(config)
    task = task_of_config(cfg)
    if input_size is not None:
        cfg = set_input_size(cfg, input_size)
    model = init_model(cfg, checkpoint)
    cfg = model.cfg
    size = _model_input_size(cfg, task)
    pose_flip, dense_flip = check_test_cfg(task, model)
    flip_indices = None
    if pose_flip:
        flip_indices = pose_dataset_meta(cfg)['flip_indices']
    pre = cfg.model.data_preprocessor
    module = SapiensExportModule(model, task, pre.mean, pre.std,
                                 bool(pre.get('bgr_to_rgb', False)),
                                 flip_indices, dense_flip).eval()

    os.makedirs(out_dir, exist_ok=True)
    # Batch 2 as the example: torch.export specialises sizes 0 and 1.
    example = torch.zeros(2, 3, *size)
    batch = torch.export.Dim('batch', min=1, max=max_batch)
    # standard ATen ops only: the files run without sapiens_mm (ONNX
    # runtimes, the standalone .pt2 runner, other CPUs)
    with torch.no_grad(), pytorch_ops_only():
        program = torch.export.export(module, (example, ),
                                      dynamic_shapes={'images': {
                                          0: batch
                                      }},
                                      strict=False)
    out_node = [n for n in program.graph.nodes if n.op == 'output'][0]
    out_shape = out_node.args[0][0].meta['val'].shape[1:]
    meta = export_metadata(task, cfg, model, size, out_shape, pose_flip)
    written: Dict[str, str] = {}
    meta_json = json.dumps(meta)
    if 'pt2' in formats:
        path = osp.join(out_dir, f'{name}.pt2')
        with atomic_path(path) as tmp:  # never a partial .pt2
            torch.export.save(program, tmp,
                              extra_files={PT2_EXTRA: meta_json})
        _record_trusted(path)
        atomic_write(json.dumps(meta, indent=1), path + '.json')
        written['pt2'] = path
        written['pt2_json'] = path + '.json'
    if 'onnx' in formats:
        path = osp.join(out_dir, f'{name}.onnx')
        written['onnx'] = _export_onnx(program, path, opset, meta)
    return written


def _record_trusted(path: str) -> None:
    """Add a ``.pt2`` just written to the trust store (a store that cannot
    be written is logged: the file is valid, but this installation will
    refuse it until it is trusted; an archive the loader's checks refuse
    is logged and not recorded)."""
    try:
        trust_exported_program(path, source='exported')
    except UntrustedModelError as e:  # the store itself is unusable
        print_log(f'{e} {path} was written, but sapiens_mm refuses to load '
                  'it until it is trusted (--trust-pt2).', logger='current',
                  level=30)
    except UnsafeModelError as e:
        print_log(f'{e} {path} was written but will not load; use the '
                  '.onnx export of this model.', logger='current', level=30)
    except OSError as e:
        print_log(f'{e}. {path} was written, but sapiens_mm refuses to load '
                  'it until it is trusted (--trust-pt2).', logger='current',
                  level=30)


def _export_onnx(program, path: str, opset: int, meta: dict) -> str:
    try:
        import onnx
        import onnxscript  # noqa: F401  (the dynamo exporter needs it)
    except ImportError as e:
        raise ImportError(
            f'ONNX export needs onnx and onnxscript ({e}); install them: '
            'pip install onnx onnxscript onnxruntime') from None
    onnx_program = torch.onnx.export(program, (),
                                     dynamo=True,
                                     opset_version=opset,
                                     input_names=[INPUT_NAME],
                                     output_names=[meta['output_name']],
                                     verbose=False)
    props = onnx_program.model.metadata_props
    for key, value in meta.items():
        props[key] = json.dumps(value)
    # Saved into a hidden folder beside the target, checked, then renamed:
    # an interrupted or failed export never leaves a partial file under the
    # final name. External weights (``<name>.onnx.data``) are referenced by
    # their base name, so they stay valid after the move; they are moved
    # first, the ``.onnx`` last.
    out_dir, name = osp.split(osp.abspath(path))
    tmp_dir = tempfile.mkdtemp(prefix=f'.{name}.tmp', dir=out_dir)
    try:
        tmp = osp.join(tmp_dir, name)
        onnx_program.save(tmp)
        version = onnx.load(tmp, load_external_data=False).opset_import
        got = max(o.version for o in version if o.domain in ('', 'ai.onnx'))
        if got != opset:
            raise RuntimeError(f'The ONNX exporter wrote opset {got} instead '
                               f'of {opset}; use opset {DEFAULT_OPSET}.')
        extra = sorted(f for f in os.listdir(tmp_dir) if f != name)
        for f in extra + [name]:
            os.replace(osp.join(tmp_dir, f), osp.join(out_dir, f))
    except OSError as e:
        raise OSError(f'Could not write the ONNX model {path}: {e}') from e
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
    return path
