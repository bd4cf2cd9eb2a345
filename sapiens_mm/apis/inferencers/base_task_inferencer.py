"""What every single-task inferencer shares: the model (eager, built by
:func:`~sapiens_mm.apis.inference.init_model`, or exported), its test
pipeline and the batched forward pass."""
from pathlib import Path
from typing import List, Mapping, Optional, Union

import torch
from mmengine.config import Config
from mmengine.dataset import Compose, pseudo_collate
from mmengine.registry import DefaultScope

from ..inference import (TASK_SCOPES, autocast, inference_pipeline,
                         init_model, task_of_config)
from ..model_zoo import SapiensModelInfo

__all__ = ['BaseTaskInferencer']


class BaseTaskInferencer:
    """One task's model with mmengine ``BaseInferencer``'s steps:
    ``preprocess`` (test pipeline, model-free and thread-safe),
    ``forward`` (batched model run), ``postprocess`` (data samples to
    arrays) and ``visualize`` (drawing), the latter two defined by each
    task's subclass.

    Args:
        cfg: The task config.
        checkpoint: A checkpoint file, a state dict already read, an
            exported ``.onnx`` / ``.pt2`` model (run with onnxruntime /
            ``torch.export``, fp32 only) or None (random weights).
        device: Torch device.
        dtype: Autocast precision of an eager model.
        info: What the model zoo recognised of the checkpoint, if anything.

    Attributes:
        task: ``'pose'``, ``'seg'``, ``'depth'`` or ``'normal'``.
        model: The eager ``nn.Module`` or the
            :class:`sapiens_mm.deploy.ExportedModel`.
        exported: Whether :attr:`model` is an exported file.
        dataset_meta: Keypoint metainfo (pose), classes / palette (seg).
        pipeline: The test pipeline, on arrays.
    """

    def __init__(self,
                 cfg: Config,
                 checkpoint: Union[str, Path, Mapping, None] = None,
                 device: Union[str, torch.device] = 'cpu',
                 dtype: torch.dtype = torch.float32,
                 info: Optional[SapiensModelInfo] = None) -> None:
        self.task = task_of_config(cfg)
        self.device, self.dtype, self.info = torch.device(device), dtype, info
        self.checkpoint = str(checkpoint) if isinstance(
            checkpoint, (str, Path)) else None
        from sapiens_mm.deploy.runtime import is_exported_model
        self.exported = self.checkpoint is not None and is_exported_model(
            self.checkpoint)
        with DefaultScope.overwrite_default_scope(TASK_SCOPES[self.task]):
            self.pipeline = Compose(inference_pipeline(cfg))
        if self.exported:
            self._init_exported(cfg)
        else:
            self.model = init_model(cfg, checkpoint, self.device)
            self.cfg = self.model.cfg
            self.dataset_meta: dict = self.model.dataset_meta
            # Under bf16 / fp16 autocast the head output is cast back to
            # float32 before decoding (numpy has no bfloat16).
            self.output_layer.register_forward_hook(
                lambda m, i, o: o.float())

    def _init_exported(self, cfg: Config) -> None:
        from sapiens_mm.deploy import ExportedModel

        from ..inference import dataset_meta_of_config
        if self.dtype != torch.float32:
            raise ValueError(
                f'{self.checkpoint} is an exported float32 model: run it '
                'with dtype="fp32".')
        self.cfg = cfg
        self.model = ExportedModel(self.checkpoint, str(self.device))
        self.dataset_meta = dataset_meta_of_config(cfg)
        h, w = self.model.input_size
        size = self.pipeline_input_size()
        if size != (w, h):
            raise ValueError(
                f'{self.checkpoint} takes {h}x{w} (H x W) inputs but the '
                f"config's test pipeline makes {size} (W, H); use the config "
                'stored in the exported file (do not pass one) or export at '
                "the pipeline's size.")

    @property
    def output_layer(self) -> torch.nn.Module:
        """The eager model's last layer (the head's output conv)."""
        raise NotImplementedError

    def pipeline_input_size(self) -> Optional[tuple]:
        """(W, H) the test pipeline feeds the model (None if not fixed)."""
        raise NotImplementedError

    def decode_exported(self, output, data_samples: list) -> list:
        """Data samples from an exported model's raw output (as the eager
        model's ``test_step`` returns them)."""
        raise NotImplementedError

    # ------------------------------------------------------------- steps
    def preprocess(self, data_infos: List[dict]) -> List[dict]:
        """Run the test pipeline on ``data_infos`` (each with ``img``, a BGR
        uint8 array). Model-free and thread-safe: the composite inferencer
        calls it in a worker thread while a model runs."""
        return [self.pipeline(info) for info in data_infos]

    @torch.no_grad()
    def forward(self, packed: List[dict], batch_size: int) -> list:
        """Run the model on :meth:`preprocess` outputs in batches of
        ``batch_size``; returns one data sample per input."""
        samples = []
        for start in range(0, len(packed), batch_size):
            chunk = packed[start:start + batch_size]
            if self.exported:
                images = torch.stack([p['inputs'] for p in chunk]).numpy()
                samples.extend(
                    self.decode_exported(self.model(images),
                                         [p['data_samples'] for p in chunk]))
                continue
            with autocast(self.device, self.dtype):
                samples.extend(self.model.test_step(pseudo_collate(chunk)))
        return samples

    def autocast(self):
        """The precision context of :meth:`forward`."""
        return autocast(self.device, self.dtype)

    def compile(self) -> None:
        """``torch.compile`` the backbone in place (the first forward pass
        at each new input shape compiles it)."""
        if self.exported:
            raise ValueError(f'{self.checkpoint} is an exported model: it '
                             'cannot be compiled; use compile=False.')
        self.model.backbone.compile()
