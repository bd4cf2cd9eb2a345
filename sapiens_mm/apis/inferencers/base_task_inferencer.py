"""What every single-task inferencer shares: mmengine's ``BaseInferencer``
steps on images, the model (eager, built by
:func:`~sapiens_mm.apis.inference.init_model`, or exported), its test
pipeline and the batched forward pass."""
import os.path as osp
from pathlib import Path
from typing import Callable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import cv2
import numpy as np
import torch
from mmengine.config import Config
from mmengine.dataset import Compose, pseudo_collate
from mmengine.infer import BaseInferencer
from mmengine.logging import print_log
from mmengine.registry import DefaultScope

from sapiens_mm.datasets.dataset_meta import dataset_meta_of_config
from sapiens_mm.deploy.runtime import ExportedModel, is_exported_model
from sapiens_mm.tasks import TASK_SCOPES, task_of_config
from sapiens_mm.utils.cpu_linear import unpack_cpu_linears
from sapiens_mm.utils.image_io import UnreadableImageError
from sapiens_mm.utils.upstream_warnings import quiet_upstream_warnings
from sapiens_mm.zoo import SapiensModelInfo

from ..inference import (
    autocast,
    check_batch_size,
    inference_pipeline,
    init_model,
    load_config,
    optimize_for_inference,
    resolve_device_and_dtype,
)
from .model_spec import registry_weights_mismatch, resolve_model
from .utils.display import StopRequested, show_images
from .utils.sources import Frame, InputsType, Source, collect_sources, iter_frames
from .utils.writers import write_png

__all__ = ['BaseTaskInferencer']

ModelType = Union[str, Path, Config, None]
WeightsType = Union[str, Path, Mapping, None]


class _Chunks:
    """The batches :meth:`BaseTaskInferencer.preprocess` yields, with a
    length (so that mmengine's progress bar knows the total)."""

    def __init__(self, items: Iterator, num: int) -> None:
        self.items, self.num = items, num

    def __iter__(self) -> Iterator:
        return self.items

    def __len__(self) -> int:
        return self.num


class BaseTaskInferencer(BaseInferencer):
    """One task's model on images, with mmengine ``BaseInferencer``'s steps
    and call convention (as mmpose's ``Pose2DInferencer`` and mmseg's
    ``MMSegInferencer``).

    ``inferencer(inputs, return_datasamples=False, batch_size=1, **kwargs)``
    runs :meth:`preprocess` (decoding, test pipeline, collation; model-free),
    :meth:`forward` (one collated batch through the model), :meth:`visualize`
    (drawings, ``vis_out_dir``, ``show``) and :meth:`postprocess` (arrays,
    ``pred_out_dir``), each taking the keyword arguments named in its
    class-level set (``preprocess_kwargs``, ``forward_kwargs``,
    ``visualize_kwargs``, ``postprocess_kwargs``); any other keyword is a
    ``ValueError``. It returns ``dict(predictions=[...],
    visualization=[...])`` with one entry per image, a list even for one
    input (mmdet's ``DetInferencer`` and mmpose's convention;
    ``visualization`` is empty unless ``return_vis``).

    Inputs: an image path, an (H, W, 3) BGR uint8 array (as from
    ``cv2.imread``), a folder (its images, recursively) or a list of these.
    Images are read by :func:`sapiens_mm.utils.image_io.read_image`; an
    unreadable one raises :class:`~sapiens_mm.utils.image_io.\
UnreadableImageError` naming the file. Videos and webcams are for
    :class:`~.sapiens_inferencer.SapiensInferencer`.

    Each data sample's metainfo has ``img_path`` (the file, or
    ``array_NNNN`` for an array) and ``output_name``: the file stem (the
    relative path inside a folder input), made unique among the inputs as
    :class:`~.sapiens_inferencer.SapiensInferencer` does (``x``, ``x_1``..);
    the files written to ``vis_out_dir`` and ``pred_out_dir`` are named
    after it.

    The composite :class:`~.sapiens_inferencer.SapiensInferencer` uses the
    same model through lower-level helpers: :meth:`run_pipeline` /
    ``preprocess_images`` (model-free, thread-safe), :meth:`forward_batches`
    and each subclass's conversion and ``draw`` methods.

    Args:
        model: The config (file or :class:`~mmengine.config.Config`), as
            upstream inferencers take it; or, with ``weights`` None, a
            checkpoint alone: an official Sapiens checkpoint (task and size
            recognised, the shipped config used; see
            :func:`~.model_spec.resolve_model`) or an exported model. None:
            ``weights`` alone.
        weights: The checkpoint of the config: a file, a state dict already
            read, an exported ``.onnx`` / ``.pt2`` model (run with
            onnxruntime / ``torch.export``, fp32 only) or None (random
            weights).
        device: Torch device. Defaults to CUDA when available, else CPU.
        dtype: Autocast precision of an eager model: a ``torch.dtype`` or
            ``'fp32'`` / ``'bf16'`` / ``'fp16'`` / ``'auto'`` (bf16 where
            the hardware has native bf16, else fp32; float32 for an exported
            model: :func:`~sapiens_mm.apis.inference.auto_dtype`). Defaults
            to float32.
        info: What the model zoo recognised of the checkpoint, if anything.
        show_progress: Show a progress bar over the batches of a call.
            Defaults to True.

    Attributes:
        task: ``'pose'``, ``'seg'``, ``'depth'``, ``'normal'``,
            ``'pointmap'`` or ``'albedo'``.
        model: The eager ``nn.Module`` or the
            :class:`sapiens_mm.deploy.ExportedModel`.
        exported: Whether :attr:`model` is an exported file.
        dataset_meta: Keypoint metainfo (pose), classes / palette (seg).
        pipeline: The test pipeline, on arrays.
        cfg: The model's config.

    Raises:
        ValueError: A model of a task this class does not run (the message
            names the class that does), or an exported model with a reduced
            ``dtype``.
        FileNotFoundError: A missing config or checkpoint.
    """

    #: The tasks the subclass runs.
    supported_tasks: Tuple[str, ...] = ()
    preprocess_kwargs: set = set()
    forward_kwargs: set = set()
    visualize_kwargs: set = {'return_vis', 'show', 'wait_time', 'vis_out_dir'}
    postprocess_kwargs: set = {'pred_out_dir'}

    def __init__(self,
                 model: ModelType = None,
                 weights: WeightsType = None,
                 device: Union[str, torch.device, None] = None,
                 dtype: Union[torch.dtype, str] = torch.float32,
                 info: Optional[SapiensModelInfo] = None,
                 show_progress: bool = True) -> None:
        # mmengine's BaseInferencer.__init__ is not called: it would build
        # the model with its own builder and set a global default scope.
        # mmseg's and mmpose's notes on building a model are hidden here
        with quiet_upstream_warnings():
            self._setup(model, weights, device, dtype, info, show_progress)

    def _setup(self, model: ModelType, weights: WeightsType, device,
               dtype: Union[torch.dtype, str],
               info: Optional[SapiensModelInfo],
               show_progress: bool) -> None:
        """The constructor's work (see the class docstring)."""
        cfg, weights, info = self._resolve(model, weights, info)
        self.task = task_of_config(cfg)
        if self.task not in self.supported_tasks:
            runner = 'PoseInferencer' if self.task == 'pose' else \
                'DenseInferencer'
            raise ValueError(f'{model if model is not None else weights} is '
                             f'a {self.task} model: run it with {runner}.')
        self.device, self.dtype = resolve_device_and_dtype(device, dtype)
        self.info = info
        self.scope = TASK_SCOPES[self.task]
        self.show_progress = show_progress
        self.collate_fn: Callable = pseudo_collate
        self.visualizer = None  # drawn by sapiens_mm.visualization instead
        self.checkpoint = str(weights) if isinstance(
            weights, (str, Path)) else None
        self.exported = self.checkpoint is not None and is_exported_model(
            self.checkpoint)
        if self.exported and isinstance(dtype, str) and dtype == 'auto':
            self.dtype = torch.float32  # an exported file is a float32 graph
        self.pipeline = self._init_pipeline(cfg)
        if self.exported:
            self._init_exported(cfg)
        else:
            try:
                model = init_model(cfg, weights, self.device)
            except RuntimeError:
                # a registry model whose weights do not fit its config: the
                # options that differ and how to pass a config, not a wall
                # of missing keys
                if info is None or info.source != 'registry' or \
                        self.checkpoint is None:
                    raise
                mismatch = registry_weights_mismatch(cfg, self.checkpoint,
                                                     info)
                if mismatch is None:
                    raise
                raise mismatch from None
            # CPU linear layers in their inference form, packed in the
            # precision the model runs at
            self.model = optimize_for_inference(model, self.dtype)
            self.cfg = self.model.cfg
            self.dataset_meta: dict = self.model.dataset_meta
            # Under bf16 / fp16 autocast the head output is cast back to
            # float32 before decoding (numpy has no bfloat16).
            self.output_layer.register_forward_hook(
                lambda m, i, o: o.float())

    @staticmethod
    def _resolve(model: ModelType, weights: WeightsType,
                 info: Optional[SapiensModelInfo]) -> tuple:
        """(config, weights, info) of the constructor's arguments."""
        if model is None and weights is None:
            raise ValueError('Give a config (model=) and its checkpoint '
                             '(weights=), or a checkpoint alone.')
        if isinstance(model, Config) or str(model).endswith('.py'):
            return load_config(model), weights, info
        if model is not None and weights is not None:
            raise ValueError(
                f'model={model!r} is not a config (.py file or Config): give '
                'the config as model and the checkpoint as weights, or the '
                'checkpoint alone.')
        resolved = resolve_model(model if model is not None else weights)
        return resolved.cfg, resolved.weights, info or resolved.info

    def _init_pipeline(self, cfg: Config) -> Compose:
        """The test pipeline of ``cfg`` on arrays (see
        :func:`~sapiens_mm.apis.inference.inference_pipeline`)."""
        with DefaultScope.overwrite_default_scope(TASK_SCOPES[self.task]):
            return Compose(inference_pipeline(cfg))

    def _init_exported(self, cfg: Config) -> None:

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
    def model_label(self) -> str:
        """What the pictures call the model (their caption): the registry
        name of a released model, else its checkpoint's folder and file
        name (``seg/iter_300.pth``), else its config's file name with
        "random weights"; ", tiny demo model" for the tiny arch of the
        tests and ``make demo``."""
        if self.info is not None and self.info.name:
            label = self.info.name
        elif self.checkpoint is not None:
            path = osp.abspath(self.checkpoint)
            label = '/'.join(
                [osp.basename(osp.dirname(path)), osp.basename(path)]
            ).lstrip('/')
        else:
            label = (f'{osp.basename(self.cfg.filename or "config")}, random '
                     'weights')
        arch = self.cfg.model.get('backbone', {}).get('arch', '')
        if isinstance(arch, str) and arch.endswith('tiny'):
            label += ', tiny demo model'
        return label

    def caption(self) -> List[str]:
        """The caption lines of this model's pictures
        (:func:`~sapiens_mm.visualization.legend.add_caption`): the task
        and :attr:`model_label`."""
        return [f'{self.task}: {self.model_label}']

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

    def to_prediction(self, sample):
        """The prediction of one image's data sample, as arrays."""
        raise NotImplementedError

    def draw(self, image: np.ndarray, prediction, **kwargs) -> np.ndarray:
        """BGR drawing of one image's :meth:`to_prediction`."""
        raise NotImplementedError

    def write_prediction(self, sample, prediction, pred_out_dir: str,
                         **kwargs) -> None:
        """Write one image's :meth:`to_prediction` to ``pred_out_dir``
        (``kwargs``: the subclass's extra ``postprocess_kwargs``)."""
        raise NotImplementedError

    # ------------------------------------------------------------ inputs
    def _inputs_to_list(self, inputs: InputsType) -> List[Source]:
        """The images of ``inputs`` (a path, array, folder or a list of
        these), not decoded yet, each with its unique output name.

        Raises:
            FileNotFoundError: A path that does not exist.
            ValueError: A folder without images, a bad array, no input, or
                a video / webcam.
        """
        sources = collect_sources(inputs)
        if not sources:
            raise ValueError('No input given.')
        for src in sources:
            if src.kind in ('video', 'webcam'):
                raise ValueError(
                    f'{src.path or src.name} is a {src.kind}: '
                    f'{type(self).__name__} runs on images; use '
                    'SapiensInferencer (or its stream()) for videos and '
                    'webcams.')
        return sources

    @staticmethod
    def read_frames(sources: Sequence[Source]) -> Iterator[Frame]:
        """Decode the images of ``sources`` one at a time.

        Raises:
            UnreadableImageError: An image cannot be read; the message
                names the file.
        """
        def fail(src: Source, reason: str) -> None:
            raise UnreadableImageError(f'{src.path}: {reason}.')

        return iter_frames(sources, None, fail)

    @staticmethod
    def name_samples(packed: List[dict], frames: Sequence[Frame],
                     owners: Optional[Sequence[int]] = None) -> None:
        """Set ``img_path`` and ``output_name`` (see the class docstring) in
        the data samples of :meth:`run_pipeline` outputs, in place.

        Args:
            packed: Pipeline outputs.
            frames: The images they come from.
            owners: Per output, the index of its image in ``frames``
                (default: one output per image, in order).
        """
        for i, item in enumerate(packed):
            src = frames[owners[i] if owners is not None else i].source
            item['data_samples'].set_metainfo(
                dict(img_path=src.path or src.name, output_name=src.name))

    def chunks(self, sources: Sequence[Source], batch_size: int,
               prepare: Callable[[List[Frame]], object]) -> _Chunks:
        """``prepare`` on each ``batch_size`` decoded images of
        ``sources`` in turn (lazily: one batch is in memory at a time)."""
        batch_size = self.check_batch_size(batch_size)
        batches = self._get_chunk_data(self.read_frames(sources), batch_size)
        return _Chunks(map(prepare, batches), -(-len(sources) // batch_size))

    #: ``batch_size`` if it is a positive int, else a ``ValueError``
    #: (:func:`~sapiens_mm.apis.inference.check_batch_size`).
    check_batch_size = staticmethod(check_batch_size)

    # ------------------------------------------------------------- steps
    def run_pipeline(self, data_infos: List[dict]) -> List[dict]:
        """Run the test pipeline on ``data_infos`` (each with ``img``, a BGR
        uint8 array). Model-free and thread-safe: the composite inferencer
        calls it in a worker thread while a model runs."""
        return [self.pipeline(info) for info in data_infos]

    @torch.no_grad()
    def run_model(self, data: dict) -> list:
        """Run the model on one collated batch (``dict(inputs=[...],
        data_samples=[...])``, as ``pseudo_collate`` makes it); returns its
        data samples with the predictions set (``model.test_step``)."""
        if self.exported:
            images = torch.stack(list(data['inputs'])).numpy()
            return self.decode_exported(self.model(images),
                                        list(data['data_samples']))
        with self.autocast():
            return self.model.test_step(data)

    def forward(self, inputs: dict, **kwargs) -> list:
        """One :meth:`preprocess` batch through the model
        (:meth:`run_model`); one data sample per image."""
        return self.run_model(inputs)

    def forward_batches(self, packed: List[dict], batch_size: int) -> list:
        """Run the model on :meth:`run_pipeline` outputs, ``batch_size`` at
        a time; returns one data sample per output, in order."""
        samples = []
        for start in range(0, len(packed), batch_size):
            samples.extend(
                self.run_model(
                    self.collate_fn(packed[start:start + batch_size])))
        return samples

    def visualize(self,
                  inputs: List[Source],
                  preds: list,
                  return_vis: bool = False,
                  show: bool = False,
                  wait_time: int = 0,
                  vis_out_dir: str = '',
                  **draw_kwargs) -> List[np.ndarray]:
        """Draw each image's prediction (see :meth:`draw`).

        Args:
            inputs: The images (:meth:`_inputs_to_list`).
            preds: Their data samples (:meth:`forward`).
            return_vis: Return the drawings.
            show: Show each in a window (``q`` / Esc: show no more).
            wait_time: ``cv2.waitKey`` time when showing, in ms (0: until a
                key is pressed).
            vis_out_dir: Write each drawing to
                ``<vis_out_dir>/<output_name>.png`` ('': none).
            **draw_kwargs: Passed to :meth:`draw`.

        Returns:
            The (H, W, 3) uint8 BGR drawings when ``return_vis``, else [].
        """
        if not (return_vis or show or vis_out_dir):
            return []
        drawings = []
        for frame, sample in zip(self.read_frames(inputs), preds):
            vis = self.draw(frame.image, self.to_prediction(sample),
                            **draw_kwargs)
            if vis_out_dir:
                write_png(osp.join(vis_out_dir, frame.source.name + '.png'),
                          vis)
            if show:
                try:
                    show_images({self.task: vis}, wait_time)
                except StopRequested:
                    show = False
                    cv2.destroyAllWindows()
            if return_vis:
                drawings.append(vis)
        if show:
            cv2.destroyAllWindows()
        return drawings

    def postprocess(self,
                    preds: list,
                    visualization: List[np.ndarray],
                    return_datasamples: bool = False,
                    pred_out_dir: str = '',
                    **write_kwargs) -> dict:
        """Pack (and write) the predictions.

        Args:
            preds: Data samples, one per image (:meth:`forward`).
            visualization: :meth:`visualize`'s drawings.
            return_datasamples: Return the data samples instead of arrays.
            pred_out_dir: Write each prediction under
                ``<pred_out_dir>/<output_name>`` (see
                :meth:`write_prediction`; '': none).
            **write_kwargs: The subclass's extra ``postprocess_kwargs``,
                passed to :meth:`write_prediction`.

        Returns:
            ``dict(predictions=[per image: :meth:`to_prediction`, or the data
            sample], visualization=visualization)``.
        """
        # the arrays, unless only the data samples are wanted
        arrays = [self.to_prediction(s) for s in preds
                  ] if pred_out_dir or not return_datasamples else []
        if pred_out_dir:
            for sample, prediction in zip(preds, arrays):
                self.write_prediction(sample, prediction, pred_out_dir,
                                      **write_kwargs)
            print_log(f'Predictions written to {pred_out_dir}',
                      logger='current')
        return dict(predictions=list(preds) if return_datasamples else arrays,
                    visualization=visualization or [])

    # ------------------------------------------------------------ speed
    def autocast(self):
        """The precision context of :meth:`run_model`."""
        return autocast(self.device, self.dtype)

    def compile(self) -> None:
        """``torch.compile`` the backbone in place (the first forward pass
        at each new input shape compiles it)."""
        if self.exported:
            raise ValueError(f'{self.checkpoint} is an exported model: it '
                             'cannot be compiled; use compile=False.')
        unpack_cpu_linears(self.model)  # torch.compile traces plain layers
        self.model.backbone.compile()
