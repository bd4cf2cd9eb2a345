"""The models a benchmark times: randomly initialised Sapiens / Sapiens2
backbones by arch name, and the comparison models of the same arch and
weights (the same model built through the registry, mmpretrain's
``VisionTransformer``, the plain-PyTorch Sapiens2 reference, Hugging Face
Transformers' Sapiens2 port, the exported model run by ONNX Runtime and
OpenVINO)."""
from typing import Callable, Dict, Optional, Sequence, Tuple

import torch
import torch.nn as nn

__all__ = ['backbone_config', 'build_backbone', 'build_registry_route',
           'is_sapiens2_arch', 'build_stock_backbone', 'TransformersSapiens2',
           'build_transformers_sapiens2', 'EXPORT_RUNTIMES', 'ExportedRuntime',
           'export_onnx', 'build_exported_runtimes', 'tensor_forward',
           'first_tensor']


def backbone_config(arch, img_size: Tuple[int, int] = (1024, 768),
                    patch_cfg: Optional[dict] = None,
                    num_layers: Optional[int] = None) -> dict:
    """The config (``type`` in mmpretrain's registry and its arguments) of
    a ``SapiensVisionTransformer`` or (for a ``sapiens2_*`` arch)
    ``Sapiens2VisionTransformer``.

    Args:
        arch: An ``arch_zoo`` name (``'sapiens_0.3b'``, ``'1b'``,
            ``'sapiens2_0.4b'``, ...) or a Sapiens ``arch`` dict.
        img_size: (H, W) of the ``pos_embed`` grid (Sapiens2: informative
            only).
        patch_cfg: ``PatchEmbed`` options (pose / normal use
            ``dict(padding=2)``); Sapiens only.
        num_layers: Keep only the first N encoder layers (quick runs). The
            Sapiens2 blocks kept have the K/V heads they have in the full
            model.
    """
    from sapiens_mm.models.backbones import (
        Sapiens2VisionTransformer,
        SapiensVisionTransformer,
    )
    if not is_sapiens2_arch(arch):
        if num_layers:
            arch = dict(SapiensVisionTransformer.arch_zoo[arch.lower()],
                        num_layers=num_layers)
        return dict(type='mmpretrain.SapiensVisionTransformer', arch=arch,
                    img_size=tuple(img_size), patch_cfg=patch_cfg)
    if patch_cfg:
        raise ValueError('Sapiens2 backbones take no patch_cfg (their '
                         'patch embedding has no padding).')
    kwargs = {}
    if num_layers:
        full = dict(Sapiens2VisionTransformer.arch_zoo[arch.lower()])
        kv = Sapiens2VisionTransformer.default_kv_heads(
            full['num_layers'], full['num_heads'])[:num_layers]
        kwargs = dict(layer_cfgs=[dict(num_kv_heads=n) for n in kv],
                      use_tokenizer=full.pop('use_tokenizer'))
        arch = dict(full, num_layers=len(kv))
    return dict(type='mmpretrain.Sapiens2VisionTransformer', arch=arch,
                img_size=tuple(img_size), **kwargs)


def build_backbone(arch, img_size: Tuple[int, int] = (1024, 768),
                   patch_cfg: Optional[dict] = None,
                   num_layers: Optional[int] = None) -> nn.Module:
    """A randomly initialised backbone of :func:`backbone_config` (same
    arguments), built by its class, in eval mode (plain:
    :func:`~sapiens_mm.analysis.drivers.benchmark_model` gives it the
    inference form of the precision it times)."""
    from sapiens_mm.models.backbones import (
        Sapiens2VisionTransformer,
        SapiensVisionTransformer,
    )
    cfg = backbone_config(arch, img_size, patch_cfg, num_layers)
    cls = SapiensVisionTransformer if cfg.pop('type').endswith(
        '.SapiensVisionTransformer') else Sapiens2VisionTransformer
    return cls(**cfg).eval()


def build_registry_route(model: nn.Module,
                         cfg: Optional[dict] = None) -> nn.Module:
    """``model`` built again the way mmengine's Runner, ``tools/test.py``
    or a user's script builds a model: ``MODELS.build`` from its config
    (a task model's ``model.cfg.model``, set by ``init_model``, in its
    task's registry scope; a backbone from ``cfg``, e.g.
    :func:`backbone_config`, in mmpretrain's registry), with ``model``'s
    weights loaded by ``load_state_dict``, in eval mode.

    Raises:
        ValueError: Neither a task model with ``cfg`` nor a ``cfg``.
    """
    import copy

    from mmengine.registry import DefaultScope

    from sapiens_mm.tasks import TASK_SCOPES, task_of_config
    if cfg is None:
        model_cfg = getattr(model, 'cfg', None)
        if model_cfg is None:
            raise ValueError('build_registry_route needs the config of a '
                             'backbone, or a task model from init_model.')
        task = task_of_config(model_cfg)
        with DefaultScope.overwrite_default_scope(TASK_SCOPES[task]):
            if task == 'pose':
                from mmpose.registry import MODELS
            else:
                from mmseg.registry import MODELS
            built = MODELS.build(copy.deepcopy(model_cfg.model))
    else:
        from mmpretrain.registry import MODELS
        built = MODELS.build(copy.deepcopy(cfg))
    built.load_state_dict(model.state_dict())
    return built.eval()


def is_sapiens2_arch(arch) -> bool:
    """Whether the arch name ``arch`` is a Sapiens2 one (``sapiens2_*``)."""
    return isinstance(arch, str) and arch.lower().startswith('sapiens2')


def build_stock_backbone(backbone: nn.Module) -> nn.Module:
    """The backbone to compare with: for a ``SapiensVisionTransformer``
    mmpretrain's own ``VisionTransformer`` with its arch, options and
    weights (a ``state_dict`` copy); for a ``Sapiens2VisionTransformer``
    (which has no stock counterpart) the plain-PyTorch
    :class:`~sapiens_mm.models.reference.Sapiens2Reference` on its weights.

    Raises:
        TypeError: ``backbone`` is neither.
    """
    from mmpretrain.models.backbones import VisionTransformer

    from sapiens_mm.models.backbones import (
        Sapiens2VisionTransformer,
        SapiensVisionTransformer,
    )
    if isinstance(backbone, Sapiens2VisionTransformer):
        from sapiens_mm.models.reference import Sapiens2Reference
        return Sapiens2Reference.from_backbone(backbone).eval()
    if not isinstance(backbone, SapiensVisionTransformer):
        raise TypeError(
            f'--compare-stock needs a SapiensVisionTransformer or '
            f'Sapiens2VisionTransformer backbone, got '
            f'{type(backbone).__name__}.')
    layer = backbone.layers[0]
    arch = dict(
        embed_dims=backbone.embed_dims,
        num_layers=backbone.num_layers,
        num_heads=layer.attn.num_heads,
        feedforward_channels=layer.ffn.feedforward_channels)
    pe = backbone.patch_embed.projection
    stock = VisionTransformer(
        arch=arch,
        img_size=tuple(backbone.patch_embed.init_input_size),
        patch_size=pe.kernel_size[0],
        out_indices=list(backbone.out_indices),
        out_type=backbone.out_type,
        with_cls_token=backbone.with_cls_token,
        final_norm=backbone.final_norm,
        interpolate_mode=backbone.interpolate_mode,
        patch_cfg=dict(padding=pe.padding[0]),
        norm_cfg=dict(type='LN', eps=backbone.ln1.eps),
        pre_norm=not isinstance(backbone.pre_norm, nn.Identity))
    stock.load_state_dict(backbone.state_dict(), strict=True)
    stock.eval()  # returns None in mmpretrain
    return stock.to(next(backbone.parameters()).device)


class TransformersSapiens2(nn.Module):
    """Hugging Face Transformers' ``Sapiens2Model`` returning what a
    ``Sapiens2VisionTransformer`` returns (a one-tuple of the final-normed
    tokens, ``'raw'``, or the patch-token feature map, ``'featmap'``).

    Args:
        model: The Transformers model.
        out_type: ``'raw'`` or ``'featmap'``.
        num_extra_tokens: CLS + register tokens before the patch tokens.
        patch_size: Pixels per patch side.
    """

    def __init__(self, model: nn.Module, out_type: str,
                 num_extra_tokens: int, patch_size: int) -> None:
        super().__init__()
        self.model = model
        self.out_type = out_type
        self.num_extra_tokens = num_extra_tokens
        self.patch_size = patch_size

    def forward(self, x):
        tokens = self.model(pixel_values=x).last_hidden_state
        if self.out_type == 'raw':
            return (tokens, )
        b, _, c = tokens.shape
        h, w = x.shape[-2] // self.patch_size, x.shape[-1] // self.patch_size
        return (tokens[:, self.num_extra_tokens:].reshape(b, h, w, c)
                .permute(0, 3, 1, 2), )


def build_transformers_sapiens2(backbone: nn.Module) -> TransformersSapiens2:
    """Transformers' Sapiens2 port with the weights of ``backbone`` (a
    ``Sapiens2VisionTransformer`` without the 4K tokenizer, ``out_type``
    ``'raw'`` or ``'featmap'``), in eval mode, for speed comparisons.

    The key mapping is Transformers' own conversion in reverse (``blocks.i``
    -> ``model.layer.i``; ``ffn.w12`` split into ``gate_proj`` (first half,
    the SiLU branch) and ``up_proj``). Transformers computes RoPE in
    float32 where the official model (and ours) uses bf16, so outputs
    differ by about 1e-3 relative; LayerScale is loaded from the weights.

    Raises:
        ImportError: transformers (>= 5.10, which has Sapiens2) is missing.
        TypeError: ``backbone`` is not a supported Sapiens2 backbone.
    """
    from sapiens_mm.models.backbones import Sapiens2VisionTransformer
    if not isinstance(backbone, Sapiens2VisionTransformer) or \
            backbone.tokenizer is not None or \
            backbone.out_type not in ('raw', 'featmap'):
        raise TypeError('--compare-transformers needs a Sapiens2 backbone '
                        'without the 4K tokenizer and with out_type raw or '
                        f'featmap, got {type(backbone).__name__}.')
    try:
        from transformers import Sapiens2Config, Sapiens2Model
    except ImportError as e:
        raise ImportError(
            '--compare-transformers needs Hugging Face transformers with '
            'Sapiens2 (>= 5.10): pip install transformers==5.23.0') from e
    blocks = backbone.blocks
    attn = blocks[0].attn
    extra = backbone.storage_tokens.shape[1]
    cfg = Sapiens2Config(
        hidden_size=backbone.embed_dims,
        intermediate_size=blocks[0].ffn.w3.in_features,
        num_hidden_layers=len(blocks),
        num_attention_heads=attn.num_heads,
        num_key_value_heads_per_layer=[b.attn.num_kv_heads for b in blocks],
        patch_size=backbone.patch_size,
        rope_theta=backbone.rope_embed.base,
        layerscale_value=1.0,
        pos_embed_rescale=None,
        num_register_tokens=extra,
        rms_norm_eps=blocks[0].ln1.eps,
        use_qk_norm=not isinstance(attn.q_norm, nn.Identity))
    model = Sapiens2Model._from_config(cfg, attn_implementation='sdpa')
    ours = backbone.state_dict()
    state = {
        'embeddings.cls_token': ours['cls_token'],
        'embeddings.register_tokens': ours['storage_tokens'],
        'embeddings.patch_embeddings.weight':
        ours['patch_embed.projection.weight'],
        'embeddings.patch_embeddings.bias': ours['patch_embed.projection.bias'],
        'norm.weight': ours['ln1.weight'],
    }
    names = dict(ln1='norm1', ln2='norm2', **{
        f'attn.{a}': f'attention.{b}'
        for a, b in dict(wq='q_proj', wk='k_proj', wv='v_proj',
                         proj='o_proj', q_norm='q_norm',
                         k_norm='k_norm').items()
    }, **{'attn.gamma': 'layer_scale1', 'ffn.w3': 'mlp.down_proj'})
    for i, block in enumerate(blocks):
        src, dst = f'blocks.{i}.', f'model.layer.{i}.'
        if isinstance(block.attn.gamma, nn.Identity):  # no LayerScale
            state[f'{dst}layer_scale1.lambda1'] = torch.ones(
                backbone.embed_dims)
        for key, value in ours.items():
            if not key.startswith(src):
                continue
            name, param = key[len(src):].rsplit('.', 1)
            if name == 'ffn.w12':
                gate, up = value.chunk(2, dim=0)
                state[f'{dst}mlp.gate_proj.{param}'] = gate
                state[f'{dst}mlp.up_proj.{param}'] = up
            elif name == 'attn.gamma':
                state[f'{dst}layer_scale1.lambda1'] = value
            else:
                state[f'{dst}{names[name]}.{param}'] = value
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise RuntimeError(f'Transformers Sapiens2 weights did not map: '
                           f'missing {missing}, unexpected {unexpected}.')
    model.eval()
    return TransformersSapiens2(model, backbone.out_type, 1 + extra,
                                backbone.patch_size)


#: The runtimes :func:`build_exported_runtimes` compares, by name.
EXPORT_RUNTIMES = ('onnxruntime', 'openvino')


def tensor_forward(model: nn.Module) -> Callable[[torch.Tensor], object]:
    """The tensor-mode forward of a backbone or a task model."""
    if hasattr(model, 'backbone') and hasattr(model, 'data_preprocessor'):
        return lambda x: model(x, None, mode='tensor')
    return model


def first_tensor(out) -> torch.Tensor:
    """The first tensor of a model's output (nested tuples / lists): what
    the benchmark compares."""
    while isinstance(out, (tuple, list)):
        out = out[0]
    return out


class _FirstTensor(nn.Module):
    """A model's tensor-mode forward reduced to its first output tensor
    (what the benchmark compares), for export."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x):
        return first_tensor(tensor_forward(self.model)(x))


class ExportedRuntime(nn.Module):
    """An ONNX model run by ONNX Runtime or OpenVINO on the CPU, called like
    the PyTorch model it was exported from (a float32 input tensor; the
    first output as a float32 tensor).

    Args:
        name: ``'onnxruntime'`` or ``'openvino'``.
        run: Takes a float32 numpy batch, returns the output array.
        precision: What the runtime computes in (``'fp32'``, ``'bf16'``).
    """

    def __init__(self, name: str, run, precision: str) -> None:
        super().__init__()
        self.name, self.run, self.precision = name, run, precision

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        import numpy as np
        images = np.ascontiguousarray(x.detach().float().cpu().numpy())
        return torch.from_numpy(np.asarray(self.run(images),
                                           dtype=np.float32))


def export_onnx(model: nn.Module, example: torch.Tensor, path: str) -> str:
    """Export ``model``'s tensor-mode forward (its first output tensor) on
    ``example``'s shape (static) to ``path`` with PyTorch's ONNX exporter;
    ``model`` must be the plain float32 model.

    Raises:
        ImportError: ``onnx`` / ``onnxscript`` are missing.
    """
    try:
        import onnx  # noqa: F401
        import onnxscript  # noqa: F401  (the dynamo exporter needs it)
    except ImportError as e:
        raise ImportError(f'ONNX export needs onnx and onnxscript ({e}): '
                          'pip install onnx onnxscript') from None
    with torch.no_grad():
        program = torch.onnx.export(_FirstTensor(model).eval(),
                                    (example.float(), ), dynamo=True,
                                    input_names=['images'], verbose=False)
    program.save(path)
    return path


def build_exported_runtimes(onnx_path: str,
                            runtimes: Sequence[str] = EXPORT_RUNTIMES,
                            dtype: str = 'fp32',
                            threads: Optional[int] = None
                            ) -> Dict[str, ExportedRuntime]:
    """The CPU runtimes a deployer would run an exported model with, on one
    ONNX file (the same graph and weights for each), by label.

    - ONNX Runtime (CPU execution provider, all graph optimisations) in
      float32: its CPU provider has no bf16 kernels for these graphs;
    - OpenVINO on ``'CPU'`` with ``INFERENCE_PRECISION_HINT`` ``f32`` for
      ``dtype='fp32'``, ``bf16`` for ``'bf16'`` (what it picks itself on a
      CPU with native bf16), ``f16`` for ``'fp16'``; latency hint.

    Both use ``threads`` intra-op threads (default: PyTorch's count).

    Args:
        onnx_path: The exported model (:func:`export_onnx`).
        runtimes: Names of :data:`EXPORT_RUNTIMES`.
        dtype: The benchmark's compute dtype.
        threads: CPU threads.

    Raises:
        ImportError: A runtime asked for is not installed (the message says
            what to install).
        ValueError: An unknown runtime name.
    """
    threads = threads or torch.get_num_threads()
    bad = [r for r in runtimes if r not in EXPORT_RUNTIMES]
    if bad:
        raise ValueError(f'Unknown runtimes {bad}; choose from '
                         f'{list(EXPORT_RUNTIMES)}.')
    out = {}
    if 'onnxruntime' in runtimes:
        try:
            import onnxruntime as ort
        except ImportError:
            raise ImportError('The ONNX Runtime comparison needs '
                              'onnxruntime: pip install onnxruntime') from None
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = \
            ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        session = ort.InferenceSession(onnx_path, options,
                                       providers=['CPUExecutionProvider'])
        name = session.get_inputs()[0].name
        out['onnxruntime fp32'] = ExportedRuntime(
            'onnxruntime', lambda x: session.run(None, {name: x})[0], 'fp32')
    if 'openvino' in runtimes:
        try:
            import openvino as ov
        except ImportError:
            raise ImportError('The OpenVINO comparison needs openvino: pip '
                              'install openvino') from None
        hint = dict(fp32='f32', bf16='bf16', fp16='f16')[dtype]
        compiled = ov.Core().compile_model(
            onnx_path, 'CPU', {
                'INFERENCE_PRECISION_HINT': hint,
                'INFERENCE_NUM_THREADS': threads,
                'PERFORMANCE_HINT': 'LATENCY',
            })
        request = compiled.create_infer_request()
        out[f'openvino {dtype}'] = ExportedRuntime(
            'openvino', lambda x: request.infer([x])[0], dtype)
    return out
